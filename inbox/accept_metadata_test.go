package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox"
)

// jsonbMaxString is one byte more than a jsonb string can hold (2^28 - 1
// bytes): PostgreSQL refuses it with "string too long to represent as jsonb
// string".
var jsonbMaxString = 1 << 28

// Metadata PostgreSQL cannot store is refused before anything is written, as
// invalid input that redelivery cannot fix, and a batch keeps its good
// messages.
func TestAcceptRefusesMetadataPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := newPool(t)
	// The largest limit is jsonb's own, so even it refuses what PostgreSQL would.
	c := newClient(t, pool, inbox.Config{MaxMetadataBytes: inbox.MaxMetadataBytesLimit})
	huge := orderMsg("evt-huge", raw(`{}`))
	huge.Metadata = map[string]string{"note": strings.Repeat("x", jsonbMaxString)}

	_, err := c.Accept(ctx, huge)
	var verr *inbox.ValidationError
	if errors.As(err, &verr) && (verr.Field != "metadata" || verr.Rule != inbox.RuleTooLarge) {
		t.Errorf("Accept: %s/%s, want metadata/too_large", verr.Field, verr.Rule)
	}
	if got := inbox.ActionFor(err); got != inbox.ActionReject || !errors.Is(err, inbox.ErrInvalid) {
		t.Errorf("Accept: %s (%.200v), want ActionReject for invalid metadata", got, err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := c.AcceptTx(ctx, tx, huge); return err })
	if got := inbox.ActionFor(err); got != inbox.ActionReject {
		t.Errorf("AcceptTx: %s (%.200v), want ActionReject", got, err)
	}

	// The rest of what jsonb refuses: U+0000 and invalid UTF-8 (a surrogate
	// encoded in UTF-8 among them), in keys and values. (Depth cannot be a
	// problem: metadata is flat.)
	bad := func(id string, md map[string]string) inbox.Message {
		m := orderMsg(id, raw(`{}`))
		m.Metadata = md
		return m
	}
	batch := []inbox.Message{
		orderMsg("evt-1", raw(`{}`)),
		huge,
		bad("evt-nul-value", map[string]string{"k": "a\x00b"}),
		bad("evt-nul-key", map[string]string{"a\x00b": "v"}),
		bad("evt-bad-utf8", map[string]string{"k": "\xff"}),
		bad("evt-surrogate", map[string]string{"\xed\xa0\x80": "v"}),
		orderMsg("evt-2", raw(`{}`)),
	}
	wantRules := map[int]inbox.Rule{1: inbox.RuleTooLarge, 2: inbox.RuleNullCharacter, 3: inbox.RuleNullCharacter, 4: inbox.RuleInvalidUTF8, 5: inbox.RuleInvalidUTF8}
	items, err := c.AcceptBatch(ctx, batch)
	if err != nil {
		t.Fatalf("AcceptBatch failed as a whole: %.200v", err)
	}
	for i, it := range items {
		rule, invalid := wantRules[i]
		switch {
		case !invalid && it.Outcome != inbox.Accepted:
			t.Errorf("item %d: %s (%.200v), want accepted", i, it.Outcome, it.Err)
		case !invalid:
		case it.Outcome != inbox.Invalid || it.Action() != inbox.ActionReject:
			t.Errorf("item %d: %s, %s (%.200v); want invalid, reject", i, it.Outcome, it.Action(), it.Err)
		case !errors.As(it.Err, &verr) || verr.Field != "metadata" || verr.Rule != rule:
			t.Errorf("item %d: %.200v, want invalid metadata (%s)", i, it.Err, rule)
		}
	}
	if n := countRows(t, pool, "message_id IN ('evt-1', 'evt-2')"); n != 2 {
		t.Errorf("%d of the batch's 2 valid messages stored", n)
	}
	if n := countRows(t, pool, "message_id NOT IN ('evt-1', 'evt-2')"); n != 0 {
		t.Errorf("%d invalid messages stored", n)
	}
}

// The limit counts metadata as jsonb stores it: a 4-byte header, 8 bytes per
// entry and the keys and values unescaped, so a value of quotes or control
// characters (two or six bytes each in JSON) counts one byte per character.
// PostgreSQL reports the same size.
func TestAcceptMetadataLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := newPool(t)
	for _, tc := range []struct {
		name  string
		limit int // Config.MaxMetadataBytes
		want  int // the limit in force
	}{
		{"default", 0, inbox.DefaultMaxMetadataBytes},
		{"configured", 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, pool, inbox.Config{MaxMetadataBytes: tc.limit})
			// The header, one entry, "k" and "\x01", then quotes.
			atLimit := map[string]string{"k": "\x01" + strings.Repeat(`"`, tc.want-4-8-2)}
			msg := orderMsg("at-limit-"+tc.name, raw(`{}`))
			msg.Metadata = atLimit
			res, err := c.Accept(ctx, msg)
			if err != nil {
				t.Fatalf("metadata at the limit: %v", err)
			}
			// pg_column_size of a value built in memory (not compressed) is
			// its 4-byte varlena header and the jsonb object.
			var stored int
			if err := pool.QueryRow(ctx, `SELECT pg_column_size(metadata::text::jsonb) - 4 FROM pginbox_receipts WHERE id = $1`, res.ID).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != tc.want {
				t.Errorf("PostgreSQL stores %d bytes, the limit counted %d", stored, tc.want)
			}

			over := orderMsg("over-"+tc.name, raw(`{}`))
			over.Metadata = map[string]string{"k": atLimit["k"] + "x"}
			_, err = c.Accept(ctx, over)
			var verr *inbox.ValidationError
			if !errors.As(err, &verr) || verr.Field != "metadata" || verr.Rule != inbox.RuleTooLarge || inbox.ActionFor(err) != inbox.ActionReject {
				t.Fatalf("one byte over the limit: %v, want an invalid metadata/too_large", err)
			}
			for _, s := range []string{fmt.Sprint(tc.want + 1), fmt.Sprint(tc.want), "Config.MaxMetadataBytes"} {
				if !strings.Contains(verr.Detail, s) {
					t.Errorf("detail %q does not say %q", verr.Detail, s)
				}
			}
		})
	}
	if n := countRows(t, pool, "message_id LIKE 'over-%'"); n != 0 {
		t.Errorf("%d receipts stored from metadata over the limit", n)
	}
}
