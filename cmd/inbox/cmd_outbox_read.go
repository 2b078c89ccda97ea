package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/pginbox/pginbox/internal/visible"
	"github.com/pginbox/pginbox/outbox"
)

var outboxStatsCmd = &command{
	Name:    "outbox stats",
	Args:    "[--published] [--json]",
	Summary: "counts per destination and status, backlog age, DEAD count",
	Help: `
PENDING events wait to be published, RETRYING among them after a failed
attempt; DUE counts PENDING events whose time has come and OLDEST DUE is how
long the longest-waiting of them has been due. Only unpublished events are
read unless --published also counts the retained PUBLISHED history.

With --json:
  {
    "dead": 1,                           DEAD events over all destinations
    "destinations": [                    one per destination, by name
      {
        "destination": "billing.v1",
        "pending": 3, "retrying": 1, "publishing": 0, "dead": 1,
        "published": 40,                 null without --published
        "due": 2,
        "oldest_due_age_seconds": 1.5    null when nothing is due
      }
    ]
  }`,
}

var outboxListCmd = &command{
	Name:    "outbox list",
	Args:    "[--status S,...] [--destination NAME] [--key KEY] [--limit N] [--after ID] [--json]",
	Summary: "list events, oldest first, a page at a time",
	Help: `
Events are listed in ID order, which is emit order across transactions. When
more match than --limit, the last line names the --after cursor for the next
page. Payloads are not listed; use ` + "`inbox outbox show ID`" + `.`,
}

var outboxShowCmd = &command{
	Name:    "outbox show",
	Args:    "ID [--json]",
	Summary: "one event: state, last error, metadata and payload",
	Help: `
ID is the event ID as ` + "`inbox outbox list`" + ` prints it (a ULID) or in UUID form: the
message ID the receiving services see. The version shown is what requeue
takes as --version.`,
}

func init() {
	outboxStatsCmd.Run = runOutboxStats
	outboxListCmd.Run = runOutboxList
	outboxShowCmd.Run = runOutboxShow
	outboxGroup.add(outboxStatsCmd)
	outboxGroup.add(outboxListCmd)
	outboxGroup.add(outboxShowCmd)
}

type jsonOutboxDestination struct {
	Destination         string   `json:"destination"`
	Pending             int64    `json:"pending"`
	Retrying            int64    `json:"retrying"`
	Publishing          int64    `json:"publishing"`
	Dead                int64    `json:"dead"`
	Published           *int64   `json:"published"` // null when not counted
	Due                 int64    `json:"due"`
	OldestDueAgeSeconds *float64 `json:"oldest_due_age_seconds"` // null when nothing is due
}

type jsonOutboxStats struct {
	Dead         int64                   `json:"dead"`
	Destinations []jsonOutboxDestination `json:"destinations"`
}

func runOutboxStats(ctx context.Context, e *env, args []string) error {
	fs := newFlags(outboxStatsCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	published := fs.Bool("published", false, "also count PUBLISHED events (scans the retained history)")
	pos, err := parseFlags(e, outboxStatsCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	admin, closeDB, err := outboxAdmin(ctx, e, &d)
	if err != nil {
		return err
	}
	defer closeDB()
	st, err := admin.Stats(ctx, outbox.StatsParams{IncludePublished: *published})
	if err != nil {
		return err
	}
	out := jsonOutboxStats{Dead: st.Dead, Destinations: []jsonOutboxDestination{}}
	for _, ds := range st.Destinations {
		j := jsonOutboxDestination{Destination: ds.Destination, Pending: ds.Pending, Retrying: ds.Retrying,
			Publishing: ds.Publishing, Dead: ds.Dead, Due: ds.Due}
		if st.PublishedCounted {
			j.Published = &ds.Published
		}
		if ds.Due > 0 {
			age := ds.OldestDueAge.Seconds()
			j.OldestDueAgeSeconds = &age
		}
		out.Destinations = append(out.Destinations, j)
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	return renderOutboxStats(e.stdout, out)
}

func renderOutboxStats(w io.Writer, st jsonOutboxStats) error {
	if len(st.Destinations) == 0 {
		fmt.Fprintln(w, "no events")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "DESTINATION\tPENDING\tRETRYING\tPUBLISHING\tDEAD\tPUBLISHED\tDUE\tOLDEST DUE")
	for _, ds := range st.Destinations {
		published, oldest := "-", "-"
		if ds.Published != nil {
			published = fmt.Sprint(*ds.Published)
		}
		if ds.OldestDueAgeSeconds != nil {
			oldest = fmtAge(time.Duration(*ds.OldestDueAgeSeconds * float64(time.Second)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n",
			visible.String(ds.Destination), ds.Pending, ds.Retrying, ds.Publishing, ds.Dead, published, ds.Due, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "dead: %d\n", st.Dead)
	return nil
}

// jsonOutboxEvent is an event in --json output.
type jsonOutboxEvent struct {
	ID             string            `json:"id"`
	Seq            int64             `json:"seq"`
	Source         string            `json:"source"`
	Destination    string            `json:"destination"`
	OrderingKey    string            `json:"ordering_key,omitempty"`
	EventType      string            `json:"event_type"`
	SchemaVersion  int               `json:"schema_version"`
	Status         string            `json:"status"`
	Version        int64             `json:"version"`
	Attempts       int               `json:"attempts"`
	AvailableAt    time.Time         `json:"available_at"`
	LeaseExpiresAt *time.Time        `json:"lease_expires_at,omitempty"`
	LastError      string            `json:"last_error,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	PublishedAt    *time.Time        `json:"published_at,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
}

func toJSONOutboxEvent(ev *outbox.EventRow) jsonOutboxEvent {
	return jsonOutboxEvent{
		ID: ev.ID.String(), Seq: ev.Seq, Source: ev.Source, Destination: ev.Destination, OrderingKey: ev.OrderingKey,
		EventType: ev.EventType, SchemaVersion: ev.SchemaVersion, Status: string(ev.Status), Version: ev.Version,
		Attempts: ev.Attempts, AvailableAt: utc(ev.AvailableAt), LeaseExpiresAt: utcPtr(ev.LeaseExpiresAt),
		LastError: ev.LastError, CreatedAt: utc(ev.CreatedAt), UpdatedAt: utc(ev.UpdatedAt),
		PublishedAt: utcPtr(ev.PublishedAt), Metadata: ev.Metadata, Payload: ev.Payload,
	}
}

// outboxStatusesFlag is a comma-separated list of event statuses, any case.
type outboxStatusesFlag struct{ list []outbox.Status }

func (f *outboxStatusesFlag) String() string {
	names := make([]string, len(f.list))
	for i, s := range f.list {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}

func (f *outboxStatusesFlag) Set(s string) error {
	f.list = nil
	for _, part := range strings.Split(s, ",") {
		st := outbox.Status(strings.ToUpper(strings.TrimSpace(part)))
		if !slices.Contains(outbox.Statuses, st) {
			return errors.New("want statuses separated by commas: PENDING, PUBLISHING, PUBLISHED, DEAD")
		}
		f.list = append(f.list, st)
	}
	return nil
}

type jsonOutboxList struct {
	Events []jsonOutboxEvent `json:"events"`
	Next   string            `json:"next,omitempty"`
}

func runOutboxList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(outboxListCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	var statuses outboxStatusesFlag
	fs.Var(&statuses, "status", "only events in statuses `S,...`: PENDING, PUBLISHING, PUBLISHED, DEAD (any case)")
	var destination, key nameFlag
	fs.Var(&destination, "destination", "only events to destination `NAME`")
	fs.Var(&key, "key", "only events with ordering key `KEY`")
	limit := numberVar(fs, "limit", outbox.DefaultListLimit, 1, outbox.MaxListLimit, fmt.Sprintf("page size `N`, 1 to %d", outbox.MaxListLimit))
	var after idFlag
	fs.Var(&after, "after", "cursor: the `ID` printed for the next page")
	pos, err := parseFlags(e, outboxListCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	admin, closeDB, err := outboxAdmin(ctx, e, &d)
	if err != nil {
		return err
	}
	defer closeDB()
	page, err := admin.List(ctx, outbox.ListParams{Statuses: statuses.list, Destination: destination.s, OrderingKey: key.s,
		Limit: int(limit.n), After: after.id})
	if err != nil {
		return err
	}
	if *asJSON {
		out := jsonOutboxList{Events: make([]jsonOutboxEvent, 0, len(page.Events)), Next: idString(page.Next)}
		for i := range page.Events {
			out.Events = append(out.Events, toJSONOutboxEvent(&page.Events[i]))
		}
		return writeJSON(e.stdout, out)
	}
	if len(page.Events) == 0 {
		fmt.Fprintln(e.stdout, "no events")
		return nil
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "ID\tSTATUS\tVER\tATTEMPTS\tDESTINATION\tKEY\tEVENT\tSOURCE\tCREATED")
	for _, ev := range page.Events {
		key := ev.OrderingKey
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s v%d\t%s\t%s\n", ev.ID, ev.Status, ev.Version, ev.Attempts,
			visible.String(ev.Destination), visible.String(key), visible.String(ev.EventType), ev.SchemaVersion,
			visible.String(ev.Source), fmtTime(ev.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !page.Next.IsZero() {
		fmt.Fprintf(e.stdout, "more: add --after %s for the next page\n", page.Next)
	}
	return nil
}

func runOutboxShow(ctx context.Context, e *env, args []string) error {
	fs := newFlags(outboxShowCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(e, outboxShowCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one event ID")
	}
	id, err := parseIDArg(pos[0])
	if err != nil {
		return err
	}
	admin, closeDB, err := outboxAdmin(ctx, e, &d)
	if err != nil {
		return err
	}
	defer closeDB()
	ev, err := admin.Get(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, toJSONOutboxEvent(ev))
	}
	return renderOutboxEvent(e.stdout, ev, time.Now())
}

func renderOutboxEvent(w io.Writer, ev *outbox.EventRow, now time.Time) error {
	tw := newTable(w)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	kv("event", ev.ID.String())
	kv("type", fmt.Sprintf("%s v%d", visible.String(ev.EventType), ev.SchemaVersion))
	kv("source", visible.String(ev.Source))
	kv("destination", visible.String(ev.Destination))
	if ev.OrderingKey != "" {
		kv("ordering key", fmt.Sprintf("%s (emit order %d)", visible.String(ev.OrderingKey), ev.Seq))
	}
	kv("status", string(ev.Status))
	kv("version", fmt.Sprint(ev.Version))
	kv("attempts", fmt.Sprint(ev.Attempts))
	switch ev.Status {
	case outbox.StatusPending:
		kv("due", fmt.Sprintf("%s (%s)", fmtTime(ev.AvailableAt), fmtRelative(ev.AvailableAt, now)))
	case outbox.StatusPublishing:
		kv("lease until", fmtTimePtr(ev.LeaseExpiresAt))
	case outbox.StatusPublished:
		kv("published", fmtTimePtr(ev.PublishedAt))
	}
	if ev.LastError != "" {
		kv("last error", oneLine(ev.LastError))
	}
	kv("emitted", fmtTime(ev.CreatedAt))
	kv("updated", fmtTime(ev.UpdatedAt))
	if len(ev.Metadata) > 0 {
		md, _ := json.Marshal(ev.Metadata)
		kv("metadata", visible.JSON(string(md)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, ev.Payload, "  ", "  "); err != nil {
		buf.Reset()
		buf.Write(ev.Payload)
	}
	fmt.Fprintf(w, "payload\n  %s\n", visible.JSON(buf.String()))
	return nil
}
