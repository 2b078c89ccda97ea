package main

import (
	"context"
	"time"
)

var showCmd = &command{
	Name:    "show",
	Args:    "ID [--tenant ID | --global] [--json]",
	Summary: "one receipt: state, payload, lineage and audit trail",
	Help: `
ID is the receipt ID as ` + "`inbox list`" + ` prints it (a ULID) or in UUID form. The
version counts the receipt's changes so far: requeue, replay and skip take it as
--version. The attempts are the tries used of the retry budget (a requeue gives a
fresh one).`,
}

func init() {
	showCmd.Run = runShow
	register(showCmd)
}

func runShow(ctx context.Context, e *env, args []string) error {
	fs := newFlags(showCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(e, showCmd, fs, args)
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
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	r, err := view.Get(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, toJSONDetails(r))
	}
	return renderReceipt(e.stdout, r, time.Now())
}
