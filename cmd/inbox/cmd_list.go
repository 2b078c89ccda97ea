package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

var listCmd = &command{
	Name:    "list",
	Args:    "[--status S,...] [--consumer NAME] [--source NAME] [--since T] [--until T] [--limit N] [--after ID]",
	Summary: "list receipts, oldest first, a page at a time",
	Help: `
Receipts are listed in ID order, which is creation order. When more match than
--limit, the last line names the --after cursor for the next page. Payloads are
not listed; use ` + "`inbox show ID`" + `.

--since and --until take RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01,
UTC) or an age (24h, 7d: that long ago, at most 36500d) and filter on creation
time.`,
}

func init() {
	listCmd.Run = runList
	register(listCmd)
}

type jsonList struct {
	Receipts []jsonReceipt `json:"receipts"`
	Next     string        `json:"next,omitempty"`
}

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(listCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	var statuses statusesFlag
	fs.Var(&statuses, "status", "only receipts in statuses `S,...`: PENDING, PROCESSING, RETRYABLE, COMPLETED, DEAD (any case)")
	var consumer, source nameFlag
	fs.Var(&consumer, "consumer", "only receipts of consumer `NAME`")
	fs.Var(&source, "source", "only receipts from source `NAME`")
	now := time.Now()
	since, until := &timeFlag{now: now}, &timeFlag{now: now}
	fs.Var(since, "since", "only receipts created at or after `T`")
	fs.Var(until, "until", "only receipts created before `T`")
	limit := numberVar(fs, "limit", inbox.DefaultListLimit, 1, inbox.MaxListLimit, fmt.Sprintf("page size `N`, 1 to %d", inbox.MaxListLimit))
	var after idFlag
	fs.Var(&after, "after", "cursor: the `ID` printed for the next page")
	pos, err := parseFlags(e, listCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	p := inbox.ListParams{
		Statuses: statuses.list, Consumer: consumer.s, Source: source.s,
		CreatedAfter: since.t, CreatedBefore: until.t, Limit: int(limit.n), After: after.id,
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	page, err := view.List(ctx, p)
	if err != nil {
		return err
	}
	if *asJSON {
		out := jsonList{Receipts: make([]jsonReceipt, 0, len(page.Receipts)), Next: idString(page.Next)}
		for i := range page.Receipts {
			out.Receipts = append(out.Receipts, toJSONReceipt(&page.Receipts[i]))
		}
		return writeJSON(e.stdout, out)
	}
	if err := renderList(e.stdout, page, s.tenant == "" && !s.global); err != nil {
		return err
	}
	if !page.Next.IsZero() {
		fmt.Fprintf(e.stdout, "more: add --after %s for the next page\n", page.Next)
	}
	return nil
}
