package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

var listCmd = &command{
	Name:    "list",
	Args:    "[--status S,...] [--consumer C] [--source S] [--since T] [--until T] [--limit N] [--after ID]",
	Summary: "list receipts, oldest first, a page at a time",
	Help: `
Receipts are listed in ID order, which is creation order. When more match than
--limit, the last line names the --after cursor for the next page. Payloads are
not listed; use ` + "`inbox show ID`" + `.

--since and --until take RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01)
or an age (24h, 7d: that long ago) and filter on creation time.`,
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
	status := fs.String("status", "", "only these `statuses`, comma-separated (PENDING, PROCESSING, RETRYABLE, COMPLETED, DEAD)")
	consumer := fs.String("consumer", "", "only this consumer")
	source := fs.String("source", "", "only this source")
	since := fs.String("since", "", "only receipts created at or after `T`")
	until := fs.String("until", "", "only receipts created before `T`")
	limit := fs.Int("limit", inbox.DefaultListLimit, fmt.Sprintf("page size, at most %d", inbox.MaxListLimit))
	after := fs.String("after", "", "cursor: the `ID` printed as the next page")
	pos, err := parseFlags(e, listCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	p := inbox.ListParams{Consumer: *consumer, Source: *source, Limit: *limit}
	if *limit < 1 || *limit > inbox.MaxListLimit {
		return usagef("--limit %d: want 1 to %d", *limit, inbox.MaxListLimit)
	}
	if *status != "" {
		for _, st := range strings.Split(*status, ",") {
			p.Statuses = append(p.Statuses, inbox.Status(strings.ToUpper(strings.TrimSpace(st))))
		}
	}
	now := time.Now()
	if *since != "" {
		if p.CreatedAfter, err = parseTime(*since, now); err != nil {
			return usagef("--since %q: %v", *since, err)
		}
	}
	if *until != "" {
		if p.CreatedBefore, err = parseTime(*until, now); err != nil {
			return usagef("--until %q: %v", *until, err)
		}
	}
	if *after != "" {
		if p.After, err = parseID(*after); err != nil {
			return err
		}
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
