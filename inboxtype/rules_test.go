package inboxtype_test

import (
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inboxtype"
)

func TestCheckIdentityString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		rule   inboxtype.IdentityRule
		detail string
	}{
		{"orders.projection.v1", "", ""},
		{"größe 注文", "", ""},
		{strings.Repeat("x", inboxtype.MaxIdentityBytes), "", ""},
		{"\uFFFD", "", ""}, // the replacement character itself is valid UTF-8
		{"", inboxtype.IdentityRequired, "must not be empty"},
		{strings.Repeat("x", inboxtype.MaxIdentityBytes+1), inboxtype.IdentityTooLong, "256 bytes: at most 255 allowed"},
		{"ab\xff", inboxtype.IdentityInvalidUTF8, "invalid UTF-8 at byte 2"},
		{"\xed\xa0\x80", inboxtype.IdentityInvalidUTF8, "invalid UTF-8 at byte 0"}, // an encoded surrogate
		{"a\tb", inboxtype.IdentityControlChar, "control character U+0009 at byte 1"},
		{"a\u0085", inboxtype.IdentityControlChar, "control character U+0085 at byte 1"},
		{"\x00\xff", inboxtype.IdentityControlChar, "control character U+0000 at byte 0"}, // the first problem wins
	}
	for _, tc := range cases {
		rule, detail := inboxtype.CheckIdentityString(tc.in)
		if rule != tc.rule || detail != tc.detail {
			t.Errorf("CheckIdentityString(%q) = %q, %q; want %q, %q", tc.in, rule, detail, tc.rule, tc.detail)
		}
	}
}
