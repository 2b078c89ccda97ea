package errtext_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pginbox/pginbox/internal/errtext"
)

func TestStorable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"nul\x00byte", `nul\x00byte`},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	} {
		if got := errtext.Storable(errors.New(tc.in)); got != tc.want {
			t.Errorf("Storable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A long message is cut on a rune boundary and marked.
	long := strings.Repeat("é", errtext.MaxLength) // two bytes each
	got := errtext.Storable(errors.New(long))
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > errtext.MaxLength+len("…") {
		t.Errorf("a %d-byte message became %d bytes (valid UTF-8: %v)", len(long), len(got), utf8.ValidString(got))
	}
}
