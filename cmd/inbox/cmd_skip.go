package main

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

var skipCmd = &command{
	Name:    "skip",
	Args:    "ID --version N --reason TEXT [--actor NAME]",
	Summary: "let the next receipt of a DEAD receipt's ordering key run; the skipped one stays DEAD",
	Help: `
A DEAD receipt with an ordering key holds back every later receipt of its key
(consumer, scope and key) until it is requeued (it runs first again) or
skipped: the key's next receipt becomes due, and the skipped receipt stays
DEAD without its place in the order (a later requeue runs it unordered). The
receipt must still be at --version (as ` + "`inbox show`" + ` printed it); otherwise
nothing changes and the exit code is 4. The skip and its audit row (actor,
reason, action skip) commit together.`,
}

func init() {
	skipCmd.Run = runSkip
	register(skipCmd)
}

type jsonSkip struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	OrderingKey string `json:"ordering_key"`
	Promoted    bool   `json:"promoted"`
	FromVersion int64  `json:"from_version"`
	Version     int64  `json:"version"`
	AuditID     int64  `json:"audit_id"`
}

func runSkip(ctx context.Context, e *env, args []string) error {
	return runChange(ctx, e, skipCmd, args, func(view *inbox.AdminView, id inbox.ID, p inbox.ChangeParams) (any, string, error) {
		res, err := view.Skip(ctx, id, p)
		if err != nil {
			return nil, "", err
		}
		next := "no receipt of the key waits"
		if res.Promoted {
			next = "the next receipt of the key is due"
		}
		return jsonSkip{ID: res.ID.String(), Status: "DEAD", OrderingKey: res.OrderingKey, Promoted: res.Promoted,
				FromVersion: res.FromVersion, Version: res.Version, AuditID: res.AuditID},
			fmt.Sprintf("skipped %s (ordering key %q): stays DEAD, version %d -> %d, %s (audit #%d)",
				res.ID, res.OrderingKey, res.FromVersion, res.Version, next, res.AuditID), nil
	})
}
