package main

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

var requeueCmd = &command{
	Name:    "requeue",
	Args:    "ID --version N --reason TEXT [--actor NAME]",
	Summary: "send a DEAD or RETRYABLE receipt back to PENDING with a fresh retry budget",
	Help: `
The receipt must still be at --version (as ` + "`inbox show`" + ` printed it); otherwise
nothing changes and the exit code is 4. The requeue and its audit row (actor,
reason, from/to status and version) commit together, and listening workers wake
up at once.`,
}

func init() {
	requeueCmd.Run = runRequeue
	register(requeueCmd)
}

type jsonRequeue struct {
	ID          string `json:"id"`
	FromStatus  string `json:"from_status"`
	Status      string `json:"status"`
	FromVersion int64  `json:"from_version"`
	Version     int64  `json:"version"`
	AuditID     int64  `json:"audit_id"`
}

func runRequeue(ctx context.Context, e *env, args []string) error {
	return runChange(ctx, e, requeueCmd, args, func(view *inbox.AdminView, id inbox.ID, p inbox.ChangeParams) (any, string, error) {
		res, err := view.Requeue(ctx, id, p)
		if err != nil {
			return nil, "", err
		}
		return jsonRequeue{ID: res.ID.String(), FromStatus: string(res.FromStatus), Status: "PENDING",
				FromVersion: res.FromVersion, Version: res.Version, AuditID: res.AuditID},
			fmt.Sprintf("requeued %s: %s -> PENDING, version %d -> %d (audit #%d)",
				res.ID, res.FromStatus, res.FromVersion, res.Version, res.AuditID), nil
	})
}

// runChange parses what requeue and replay share (ID, version, reason, actor,
// scope, database) and prints act's result as JSON or text.
func runChange(ctx context.Context, e *env, cmd *command, args []string,
	act func(view *inbox.AdminView, id inbox.ID, p inbox.ChangeParams) (asJSON any, text string, err error)) error {
	fs := newFlags(cmd)
	var d dbFlags
	var s scopeFlags
	var c changeFlags
	d.add(fs)
	s.add(fs)
	c.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(e, cmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one receipt ID")
	}
	id, err := parseIDArg(pos[0])
	if err != nil {
		return err
	}
	p, err := c.params(e)
	if err != nil {
		return err
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	j, text, err := act(view, id, p)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, j)
	}
	fmt.Fprintln(e.stdout, text)
	return nil
}
