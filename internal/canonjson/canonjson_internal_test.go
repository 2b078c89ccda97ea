package canonjson

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestPlain8(t *testing.T) {
	var w [8]byte
	check := func() {
		t.Helper()
		want := true
		for _, c := range w {
			want = want && strPlain[c]
		}
		if got := plain8(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("plain8(% x) = %v, want %v", w, got, want)
		}
	}
	// Every byte value in every position, surrounded by plain and by
	// high-bit bytes.
	for _, fill := range []byte{'a', 0x80, 0xff, 0x21, 0x5d, 0x23} {
		for pos := range 8 {
			for c := range 256 {
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check()
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', '\\', 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	for range 200000 {
		for i := range w {
			if r.IntN(2) == 0 {
				w[i] = interesting[r.IntN(len(interesting))]
			} else {
				w[i] = byte(r.Uint32())
			}
		}
		check()
	}
}

func TestCompareUTF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ranges := [][2]rune{{0, 0x7f}, {0x80, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xffff}, {0x10000, 0x10ffff}}
	randString := func() []byte {
		var b []byte
		for range r.IntN(4) {
			rg := ranges[r.IntN(len(ranges))]
			b = utf8.AppendRune(b, rg[0]+r.Int32N(rg[1]-rg[0]+1))
		}
		return b
	}
	for range 200000 {
		a, b := randString(), randString()
		if r.IntN(4) == 0 {
			b = append(append([]byte{}, a...), b...)
		}
		want := slices.Compare(utf16.Encode([]rune(string(a))), utf16.Encode([]rune(string(b))))
		if got := compareUTF16(a, b); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

// Numbers count at their plain decimal length, as PostgreSQL prints numeric,
// so a short document cannot stand for gigabytes of digits.
func TestSizeCountsPlainDecimalLength(t *testing.T) {
	for _, tc := range []struct {
		in        string
		plainSize int
	}{
		{`1e131071`, 131072},
		{`-1e131071`, 131073},
		{`1e-16383`, 16385},      // 0.<16382 zeros>1
		{`123.456e3`, 6},         // 123456
		{`1.5e-3`, 6},            // 0.0015
		{`[1e30,2]`, 2 + 31 + 2}, // [ , ] and 2
		{`{"a":1e25}`, 6 + 26},   // {"a":} and 26 digits
	} {
		if _, err := Canonicalize([]byte(tc.in), Limits{MaxBytes: tc.plainSize}); err != nil {
			t.Errorf("%s at MaxBytes %d: %v", tc.in, tc.plainSize, err)
		}
		_, err := Canonicalize([]byte(tc.in), Limits{MaxBytes: tc.plainSize - 1})
		var cerr *Error
		if !errors.As(err, &cerr) || cerr.Rule != RuleSize {
			t.Errorf("%s at MaxBytes %d: want too_large, got %v", tc.in, tc.plainSize-1, err)
		}
	}
}
