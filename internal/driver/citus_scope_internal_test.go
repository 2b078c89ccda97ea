package driver

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inboxtype"
)

// SET takes no parameters: the scope is written into the statement as an
// escape string constant, quotes and backslashes doubled, a NUL refused.
func TestQuoteSetting(t *testing.T) {
	for in, want := range map[string]string{
		"tenant-a":            `E'tenant-a'`,
		"":                    `E''`,
		`o'brien`:             `E'o''brien'`,
		`back\slash`:          `E'back\\slash'`,
		`'; RESET ALL; --`:    `E'''; RESET ALL; --'`,
		`\'; DROP TABLE x --`: `E'\\''; DROP TABLE x --'`,
		"ünïcode":             `E'ünïcode'`,
	} {
		got, err := quoteSetting(in)
		if err != nil || got != want {
			t.Errorf("quoteSetting(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := quoteSetting("a\x00b"); !errors.Is(err, errScopeNUL) {
		t.Errorf("quoteSetting with a NUL: err = %v, want errScopeNUL", err)
	}
	b := &pgx.Batch{}
	if err := queueCitusScope(context.Background(), b, ScopeParams(inboxtype.Global())); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Len(), citusScopeStatements; got != want { // ScopePropagate and the two settings
		t.Fatalf("scope statements = %d, want %d", got, want)
	}
	if q := b.QueuedQueries; q[1].SQL != `SET LOCAL pginbox.tenant = E''` || q[2].SQL != `SET LOCAL pginbox.global = E'on'` {
		t.Errorf("global scope: %q, %q", q[1].SQL, q[2].SQL)
	}
}
