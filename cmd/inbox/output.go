package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/visible"
)

var discardLogger = slog.New(slog.DiscardHandler)

// The --json output is a stable, documented format of its own (snake_case,
// times in UTC RFC 3339, IDs as ULIDs), independent of the Go API's structs.

type jsonScope struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

type jsonReceipt struct {
	ID              string            `json:"id"`
	Scope           jsonScope         `json:"scope"`
	Source          string            `json:"source"`
	Consumer        string            `json:"consumer"`
	MessageID       string            `json:"message_id"`
	EventType       string            `json:"event_type"`
	SchemaVersion   int               `json:"schema_version"`
	Status          string            `json:"status"`
	Version         int64             `json:"version"`
	Attempts        int               `json:"attempts"`
	MaxAttempts     int               `json:"max_attempts"`
	AvailableAt     time.Time         `json:"available_at"`
	LeaseExpiresAt  *time.Time        `json:"lease_expires_at,omitempty"`
	LastError       string            `json:"last_error,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	CompletedAt     *time.Time        `json:"completed_at,omitempty"`
	ReplayOf        string            `json:"replay_of,omitempty"`
	PayloadPurgedAt *time.Time        `json:"payload_purged_at,omitempty"`
	Fingerprint     string            `json:"fingerprint,omitempty"`
	OrderingKey     string            `json:"ordering_key,omitempty"`
	OrderingSeq     int64             `json:"ordering_seq,omitempty"`
	Blocked         bool              `json:"blocked,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	Payload         json.RawMessage   `json:"payload,omitempty"`
}

type jsonDetails struct {
	jsonReceipt
	Replays []jsonReplay `json:"replays"`
	Audit   []jsonAudit  `json:"audit"`
}

type jsonReplay struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Version     int64      `json:"version"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

type jsonAudit struct {
	ID           int64     `json:"id"`
	ReceiptID    string    `json:"receipt_id"`
	Action       string    `json:"action"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason"`
	FromStatus   string    `json:"from_status"`
	ToStatus     string    `json:"to_status"`
	FromVersion  int64     `json:"from_version"`
	ToVersion    int64     `json:"to_version"`
	NewReceiptID string    `json:"new_receipt_id,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func idString(id inbox.ID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

func toJSONReceipt(r *inbox.Receipt) jsonReceipt {
	out := jsonReceipt{
		ID:              r.ID.String(),
		Scope:           jsonScope{Kind: string(r.Scope.Kind), ID: r.Scope.ID},
		Source:          r.Source,
		Consumer:        r.Consumer,
		MessageID:       r.MessageID,
		EventType:       r.EventType,
		SchemaVersion:   r.SchemaVersion,
		Status:          string(r.Status),
		Version:         r.Version,
		Attempts:        r.Attempts,
		MaxAttempts:     r.MaxAttempts,
		AvailableAt:     utc(r.AvailableAt),
		LeaseExpiresAt:  utcPtr(r.LeaseExpiresAt),
		LastError:       r.LastError,
		CreatedAt:       utc(r.CreatedAt),
		UpdatedAt:       utc(r.UpdatedAt),
		CompletedAt:     utcPtr(r.CompletedAt),
		ReplayOf:        idString(r.ReplayOf),
		PayloadPurgedAt: utcPtr(r.PayloadPurgedAt),
		OrderingKey:     r.OrderingKey,
		OrderingSeq:     r.OrderingSeq,
		Blocked:         r.Blocked,
		Metadata:        r.Metadata,
		Payload:         r.Payload,
	}
	if len(r.Fingerprint) > 0 {
		out.Fingerprint = hex.EncodeToString(r.Fingerprint)
	}
	return out
}

func toJSONDetails(d *inbox.ReceiptDetails) jsonDetails {
	out := jsonDetails{jsonReceipt: toJSONReceipt(&d.Receipt), Replays: []jsonReplay{}, Audit: []jsonAudit{}}
	for _, r := range d.Replays {
		out.Replays = append(out.Replays, jsonReplay{ID: r.ID.String(), Status: string(r.Status), Version: r.Version,
			CreatedAt: utc(r.CreatedAt), CompletedAt: utcPtr(r.CompletedAt)})
	}
	for _, a := range d.Audit {
		out.Audit = append(out.Audit, toJSONAudit(a))
	}
	return out
}

func toJSONAudit(a inbox.AuditEntry) jsonAudit {
	return jsonAudit{
		ID: a.ID, ReceiptID: a.ReceiptID.String(), Action: a.Action, Actor: a.Actor, Reason: a.Reason,
		FromStatus: string(a.FromStatus), ToStatus: string(a.ToStatus),
		FromVersion: a.FromVersion, ToVersion: a.ToVersion,
		NewReceiptID: idString(a.NewReceiptID), CreatedAt: utc(a.CreatedAt),
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// fmtTime prints an instant in UTC to the second.
func fmtTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

// fmtAge prints a duration the way people read ages: 850ms, 42s, 3m05s,
// 2h10m, 4d03h.
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtAge(-d)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// count writes n and its noun in singular or plural: "1 batch", "3 batches".
func count[N int | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// fmtRelative says when t is relative to now: "in 3.0s" or "42s ago".
func fmtRelative(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + fmtAge(d)
	}
	return fmtAge(now.Sub(t)) + " ago"
}

// renderStats prints the stats table. A nameWidth above zero cuts longer
// consumer names to that many cells.
func renderStats(w io.Writer, st *inbox.Stats, nameWidth int) error {
	if len(st.Consumers) == 0 {
		fmt.Fprintln(w, "no receipts")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "CONSUMER\tPENDING\tPROCESSING\tRETRYABLE\tDEAD\tCOMPLETED\tDUE\tOLDEST DUE")
	for _, c := range st.Consumers {
		completed := "-"
		if st.CompletedCounted {
			completed = fmt.Sprint(c.Completed)
		}
		oldest := "-"
		if c.Due > 0 {
			oldest = fmtAge(c.OldestDueAge)
		}
		name := visible.String(c.Consumer)
		if nameWidth > 0 {
			name = cutWidth(name, nameWidth)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n",
			name, c.Pending, c.Processing, c.Retryable, c.Dead, completed, c.Due, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "dead: %d\n", st.Dead)
	if st.Blocked > 0 {
		fmt.Fprintf(w, "blocked: %d (PENDING, waiting behind an earlier receipt of their ordering key)\n", st.Blocked)
	}
	return nil
}

// renderList prints one page of receipts. showScope adds a SCOPE column (for
// views over several scopes).
func renderList(w io.Writer, page *inbox.ListResult, showScope bool) error {
	if len(page.Receipts) == 0 {
		fmt.Fprintln(w, "no receipts")
		return nil
	}
	tw := newTable(w)
	head := "ID\tSTATUS\tVER\tATTEMPTS\tCONSUMER\tSOURCE\tMESSAGE ID\tEVENT\tCREATED"
	if showScope {
		head = "ID\tSCOPE\tSTATUS\tVER\tATTEMPTS\tCONSUMER\tSOURCE\tMESSAGE ID\tEVENT\tCREATED"
	}
	// A KEY column only when a receipt of the page has an ordering key.
	keyed := slices.ContainsFunc(page.Receipts, func(r inbox.Receipt) bool { return r.OrderingKey != "" })
	if keyed {
		head += "\tKEY"
	}
	fmt.Fprintln(tw, head)
	for _, r := range page.Receipts {
		status := string(r.Status)
		if r.Blocked {
			status += " (blocked)"
		}
		if r.Purged() {
			status += " (purged)"
		}
		if r.IsReplay() {
			status += " (replay)"
		}
		cols := []string{r.ID.String()}
		if showScope {
			cols = append(cols, visible.String(r.Scope.String()))
		}
		cols = append(cols, status, fmt.Sprint(r.Version), fmt.Sprintf("%d/%d", r.Attempts, r.MaxAttempts),
			visible.String(r.Consumer), visible.String(r.Source), visible.String(r.MessageID),
			fmt.Sprintf("%s v%d", visible.String(r.EventType), r.SchemaVersion), fmtTime(r.CreatedAt))
		if keyed {
			key := "-"
			if r.OrderingKey != "" {
				key = fmt.Sprintf("%s #%d", visible.String(r.OrderingKey), r.OrderingSeq)
			}
			cols = append(cols, key)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// renderReceipt prints one receipt with its payload, lineage and audit trail.
// Every value from producers, handlers and operators is shown through
// visible.String, so no control or bidirectional character reaches the
// terminal raw.
func renderReceipt(w io.Writer, d *inbox.ReceiptDetails, now time.Time) error {
	tw := newTable(w)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	kv("receipt", d.ID.String())
	kv("scope", visible.String(d.Scope.String()))
	kv("source", visible.String(d.Source))
	kv("consumer", visible.String(d.Consumer))
	kv("message id", visible.String(d.MessageID))
	kv("event", fmt.Sprintf("%s v%d", visible.String(d.EventType), d.SchemaVersion))
	kv("status", string(d.Status))
	// The two numbers an operator acts on, each with what it means.
	kv("version", fmt.Sprintf("%d (changes so far; requeue, replay and skip take it as --version)", d.Version))
	kv("attempts", fmt.Sprintf("%d of %d (tries used of the retry budget)", d.Attempts, d.MaxAttempts))
	if d.OrderingKey != "" {
		kv("ordering key", fmt.Sprintf("%s (#%d of its key)", visible.String(d.OrderingKey), d.OrderingSeq))
	}
	if d.Blocked {
		kv("waits", "behind an earlier receipt of its ordering key (a DEAD one holds the key until it is requeued or skipped)")
	}
	switch d.Status {
	case inbox.StatusPending, inbox.StatusRetryable:
		kv("due", fmt.Sprintf("%s (%s)", fmtTime(d.AvailableAt), fmtRelative(d.AvailableAt, now)))
	case inbox.StatusProcessing:
		kv("lease until", fmtTimePtr(d.LeaseExpiresAt))
	}
	if d.LastError != "" {
		kv("last error", oneLine(d.LastError))
	}
	kv("created", fmtTime(d.CreatedAt))
	kv("updated", fmtTime(d.UpdatedAt))
	if d.CompletedAt != nil {
		kv("completed", fmtTime(*d.CompletedAt))
	}
	if d.IsReplay() {
		kv("replay of", d.ReplayOf.String())
	}
	kv("fingerprint", hex.EncodeToString(d.Fingerprint))
	if len(d.Metadata) > 0 {
		md, _ := json.Marshal(d.Metadata)
		kv("metadata", visible.JSON(string(md)))
	}
	if d.Purged() {
		kv("payload", "purged at "+fmtTimePtr(d.PayloadPurgedAt)+" (retention); identity and fingerprint are kept")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !d.Purged() && len(d.Payload) > 0 {
		var buf bytes.Buffer
		if err := json.Indent(&buf, d.Payload, "  ", "  "); err != nil {
			buf.Reset()
			buf.Write(d.Payload)
		}
		fmt.Fprintf(w, "payload\n  %s\n", visible.JSON(buf.String()))
	}
	if len(d.Replays) > 0 {
		fmt.Fprintln(w, "replays")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tSTATUS\tVER\tCREATED")
		for _, r := range d.Replays {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", r.ID, r.Status, r.Version, fmtTime(r.CreatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(d.Audit) > 0 {
		fmt.Fprintln(w, "audit")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  WHEN\tACTION\tACTOR\tSTATUS\tVERSION\tREASON")
		for _, a := range d.Audit {
			action := a.Action
			if a.ReceiptID != d.ID {
				action += " of " + a.ReceiptID.String()
			} else if !a.NewReceiptID.IsZero() {
				action += " -> " + a.NewReceiptID.String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s -> %s\t%d -> %d\t%s\n", fmtTime(a.CreatedAt), action, visible.String(a.Actor),
				a.FromStatus, a.ToStatus, a.FromVersion, a.ToVersion, oneLine(a.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// oneLine keeps a table row on one line, with what would not show as itself
// escaped.
func oneLine(s string) string {
	return visible.String(strings.Join(strings.Fields(s), " "))
}
