package modeltest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pginbox/pginbox/inbox"
)

// dbRow is a receipt as the database has it, in the model's terms.
type dbRow struct {
	Receipt
	work     Work
	token    *inbox.ID
	replayOf *inbox.ID
}

// compare lists every difference between the model's state and the
// database's rows.
func (d *driver) compare(s State) ([]string, error) {
	rows, err := d.pool.Query(d.ctx, `
SELECT r.id, r.scope_id, r.message_id, r.status, r.version, r.attempts, r.payload IS NOT NULL, r.replay_of,
       coalesce(w.status, 'NONE'), coalesce(w.scope_id, ''), coalesce(w.attempts, 0), w.claim_token,
       coalesce(w.lease_expires_at < now(), false), coalesce(w.available_at <= now(), false), coalesce(w.version, 0),
       coalesce(r.ordering_key, ''), coalesce(r.ordering_seq, 0), coalesce(w.ordering_key, ''), coalesce(w.ordering_seq, 0)
FROM pginbox_receipts r
LEFT JOIN pginbox_work w ON w.receipt_id = r.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[inbox.ID]dbRow{}
	for rows.Next() {
		var id inbox.ID
		var r dbRow
		var version, attempts, wattempts, wversion int64
		if err := rows.Scan(&id, &r.Scope, &r.Msg, &r.Status, &version, &attempts, &r.Payload, &r.replayOf,
			&r.work.Status, &r.work.Scope, &wattempts, &r.token, &r.work.Expired, &r.work.Due, &wversion,
			&r.Key, &r.Seq, &r.work.Key, &r.work.Seq); err != nil {
			return nil, err
		}
		r.Version, r.Attempts, r.work.Attempts, r.work.Version = version, attempts, wattempts, wversion
		got[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var diffs []string
	diff := func(id int64, what string, model, database any) {
		if fmt.Sprint(model) != fmt.Sprint(database) {
			diffs = append(diffs, fmt.Sprintf("receipt %d: %s: model %v, database %v", id, what, model, database))
		}
	}
	models := 0
	for k, m := range s.Receipts {
		if m.Status == "NONE" {
			continue
		}
		models++
		var n int64
		fmt.Sscan(k, &n)
		r, ok := got[d.ids[n]]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("receipt %d: in the model, not in the database", n))
			continue
		}
		diff(n, "scope", m.Scope, r.Scope)
		diff(n, "message", m.Msg, r.Msg)
		diff(n, "status", m.Status, r.Status)
		diff(n, "version", m.Version, r.Version)
		diff(n, "attempts", m.Attempts, r.Attempts)
		diff(n, "payload", m.Payload, r.Payload)
		replayOf := int64(0)
		if r.replayOf != nil {
			replayOf = d.model(*r.replayOf)
		}
		diff(n, "replay_of", m.ReplayOf, replayOf)
		diff(n, "ordering key", m.Key, r.Key)
		diff(n, "ordering seq", m.Seq, r.Seq)
		w := s.Work[k]
		diff(n, "work status", w.Status, r.work.Status)
		if w.Status == "NONE" {
			continue
		}
		diff(n, "work scope", w.Scope, r.work.Scope)
		diff(n, "work attempts", w.Attempts, r.work.Attempts)
		diff(n, "work version", w.Version, r.work.Version)
		diff(n, "work ordering key", w.Key, r.work.Key)
		diff(n, "work ordering seq", w.Seq, r.work.Seq)
		token := "none"
		if r.token != nil {
			token = r.token.String()
		}
		want := "none"
		if w.Token != 0 {
			want = d.tokens[w.Token].String()
		}
		diff(n, "claim token", want, token)
		if w.Status == "PROCESSING" && s.LockedBy[k] == "" {
			diff(n, "lease expired", w.Expired, r.work.Expired)
		}
		if w.Status == "PENDING" || w.Status == "RETRYABLE" {
			diff(n, "due", w.Due, r.work.Due)
		}
	}
	if models != len(got) {
		diffs = append(diffs, fmt.Sprintf("the model has %d receipts, the database %d", models, len(got)))
	}
	sort.Strings(diffs)
	return diffs, nil
}

func (d *driver) model(id inbox.ID) int64 {
	for k, v := range d.ids {
		if v == id {
			return k
		}
	}
	return -1
}

func describe(s Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", s.Act)
	if s.Worker != "" {
		fmt.Fprintf(&b, " worker=%s", s.Worker)
	}
	if s.ID != 0 {
		fmt.Fprintf(&b, " receipt=%d", s.ID)
	}
	if s.Token != 0 {
		fmt.Fprintf(&b, " token=%d", s.Token)
	}
	if s.Scope != "" {
		fmt.Fprintf(&b, " scope=%s", s.Scope)
	}
	if s.Msg != "" {
		fmt.Fprintf(&b, " msg=%s", s.Msg)
	}
	if s.Key != "" {
		fmt.Fprintf(&b, " key=%s", s.Key)
	}
	fmt.Fprintf(&b, " flag=%v arg=%d -> %s", s.Flag, s.Arg, s.Outcome)
	return b.String()
}
