package main

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

var replayCmd = &command{
	Name:    "replay",
	Args:    "ID --version N --reason TEXT [--actor NAME]",
	Summary: "run a COMPLETED receipt again as a NEW linked receipt",
	Help: `
Replay deliberately allows another business execution of the same event: it
creates a new PENDING receipt with the same identity and payload, linked to the
original (replay_of). The original stays COMPLETED; only its version moves, so
of two operators replaying at the same --version only one succeeds (the other
gets exit code 4). A receipt whose payload was purged cannot be replayed.`,
}

func init() {
	replayCmd.Run = runReplay
	register(replayCmd)
}

type jsonReplayResult struct {
	OriginalID      string `json:"original_id"`
	OriginalVersion int64  `json:"original_version"`
	NewID           string `json:"new_id"`
	AuditID         int64  `json:"audit_id"`
}

func runReplay(ctx context.Context, e *env, args []string) error {
	return runChange(ctx, e, replayCmd, args, func(view *inbox.AdminView, id inbox.ID, p inbox.ChangeParams) (any, string, error) {
		res, err := view.Replay(ctx, id, p)
		if err != nil {
			return nil, "", err
		}
		return jsonReplayResult{OriginalID: res.OriginalID.String(), OriginalVersion: res.OriginalVersion,
				NewID: res.NewID.String(), AuditID: res.AuditID},
			fmt.Sprintf("replayed %s as new receipt %s (PENDING); original now at version %d (audit #%d)",
				res.OriginalID, res.NewID, res.OriginalVersion, res.AuditID), nil
	})
}
