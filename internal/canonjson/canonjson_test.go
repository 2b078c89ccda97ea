package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/canonjson"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// jcsDir is where the RFC 8785 conformance vectors live.
func jcsDir() string {
	if d := os.Getenv("PGINBOX_JCS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "testdata", "jcs")
}

// jcsInputs returns the conformance input files, failing the test when the
// vectors cannot be found.
func jcsInputs(tb testing.TB) []string {
	tb.Helper()
	dir := jcsDir()
	files, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("RFC 8785 conformance vectors not found under %q (want input/*.json and output/*.json; "+
			"set PGINBOX_JCS_DIR to the directory holding them): glob error %v, %d files", dir, err, len(files))
	}
	return files
}

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := canonjson.Canonicalize([]byte(in), canonjson.Limits{})
	if err != nil {
		t.Fatalf("Canonicalize(%q): unexpected error: %v", in, err)
	}
	return string(out)
}

func TestConformance(t *testing.T) {
	const (
		rfcForm     = "333333333.3333333"  // RFC 8785 rounds through float64
		pginboxForm = "333333333.33333329" // pginbox keeps the exact digits
	)
	sawValues := false
	for _, in := range jcsInputs(t) {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(jcsDir(), "output", name))
			if err != nil {
				t.Fatalf("expected output for %s: %v", name, err)
			}
			if name == "values.json" {
				sawValues = true
				// The single documented difference (README.md there).
				if n := bytes.Count(want, []byte(rfcForm)); n != 1 {
					t.Fatalf("values.json expected output holds %q %d times, want exactly 1", rfcForm, n)
				}
				want = bytes.Replace(want, []byte(rfcForm), []byte(pginboxForm), 1)
			}
			got, err := canonjson.Canonicalize(src, canonjson.Limits{})
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("mismatch\n got: %s\nwant: %s", got, want)
			}
			again, err := canonjson.Canonicalize(got, canonjson.Limits{})
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s, %v", again, err)
			}
		})
	}
	if !sawValues {
		t.Fatalf("values.json missing from %s/input", jcsDir())
	}
}

func TestNumbers(t *testing.T) {
	tests := []struct{ in, want string }{
		// The number rules of docs/fingerprint.md.
		{"1", "1"},
		{"1.0", "1"},
		{"1e0", "1"},
		{"10e-1", "1"},
		{"-0", "0"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"1E30", "1e+30"},
		{"0.000000000000000000000000001", "1e-27"},
		{"9007199254740993", "9007199254740993"},
		{"9007199254740992", "9007199254740992"},
		{"333333333.33333329", "333333333.33333329"},
		{"123e-2", "1.23"},
		{"100", "100"},
		{"1e21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"-1.50e2", "-150"},
		{"0.0", "0"},
		{"-0.0e5", "0"},
		{"123456789012345678901234567890", "1.2345678901234567890123456789e+29"},
		// Values checked against node's String(Number(x)).
		{"5e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"0.1", "0.1"},
		{"123456789012", "123456789012"},
		{"1.5e300", "1.5e+300"},
		{"-2.5e-8", "-2.5e-8"},
		{"0.000123", "0.000123"},
		{"1234567.125", "1234567.125"},
		{"4.35", "4.35"},
		{"33.3e-30", "3.33e-29"},
		// Exact digits where ES6 would round (node prints 1e+23).
		{"9.999999999999999e22", "9.999999999999999e+22"},
		{"0.10000000000000000000000000001", "0.10000000000000000000000000001"},
		// Layout boundaries.
		{"123456789012345678901", "123456789012345678901"},        // n = 21
		{"1234567890123456789012", "1.234567890123456789012e+21"}, // n = 22
		{"12345678901234567890.5", "12345678901234567890.5"},
		{"123456789012345678901.5", "123456789012345678901.5"},
		{"1234567890123456789012.5", "1.2345678901234567890125e+21"},
		{"0.0000012", "0.0000012"},
		{"0.00000012", "1.2e-7"},
		{"-0.000001", "-0.000001"},
		{"0E0", "0"},
		{"0e-5", "0"},
		{"-0.000e+7", "0"},
		{"1e+0", "1"},
		{"1e-0", "1"},
		{"1E+00002", "100"},
		{"10", "10"},
		{"0.5", "0.5"},
		{"-5", "-5"},
		{"12.34e1", "123.4"},
		{"12.34e2", "1234"},
		{"12.34e-2", "0.1234"},
		{"1000000e-6", "1"},
		{"0.00100", "0.001"},
		{"1e131071", "1e+131071"},
		{"-9.99e131071", "-9.99e+131071"},
		{"1e-16383", "1e-16383"},
		{"0e1073741822", "0"},
		{"0e-16383", "0"},
		{"0.0001e131075", "1e+131071"},
	}
	for _, tt := range tests {
		if got := canon(t, tt.in); got != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
		}
		// Canonical output is a fixed point.
		if got := canon(t, tt.want); got != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want it unchanged", tt.want, got)
		}
		// Numbers inside containers behave the same.
		if got := canon(t, "[ "+tt.in+" , {\"n\" : "+tt.in+"} ]"); got != "["+tt.want+",{\"n\":"+tt.want+"}]" {
			t.Errorf("in containers: Canonicalize(%s) = %s", tt.in, got)
		}
	}
}

// es6 formats f like ECMAScript Number.prototype.toString, starting from the
// shortest round-trip digits strconv produces. It shares no code with the
// package.
func es6(f float64) string {
	if f == 0 {
		return "0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±dd
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expPart, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, err := strconv.Atoi(expPart)
	if err != nil {
		panic(err)
	}
	k, n := len(digits), e+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	r := sign + digits[:1]
	if k > 1 {
		r += "." + digits[1:]
	}
	if e >= 0 {
		return r + "e+" + strconv.Itoa(e)
	}
	return r + "e-" + strconv.Itoa(-e)
}

func TestES6Reference(t *testing.T) {
	// The reference formatter itself, against node's String(Number(x)).
	for in, want := range map[float64]string{
		1e21: "1e+21", 1e20: "100000000000000000000", 1e-6: "0.000001", 1e-7: "1e-7",
		-150: "-150", 5e-324: "5e-324", 1.7976931348623157e308: "1.7976931348623157e+308",
		0.1: "0.1", 3.33e-29: "3.33e-29", 333333333.33333329: "333333333.3333333", 1e23: "1e+23",
	} {
		if got := es6(in); got != want {
			t.Errorf("es6(%v) = %s, want %s", in, got, want)
		}
	}
}

func TestNumbersMatchES6ForShortestFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(8785, 1))
	n := 100000
	if testing.Short() {
		n = 10000
	}
	for i := 0; i < n; i++ {
		var f float64
		switch i % 4 {
		case 0, 1: // any bit pattern
			f = math.Float64frombits(r.Uint64())
		case 2: // typical magnitudes
			f = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
		case 3: // short decimals such as prices
			f = float64(r.Int64N(2000000)-1000000) / math.Pow(10, float64(r.IntN(8)))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want := es6(f)
		for _, in := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'E', -1, 64),
			strconv.FormatFloat(f, 'f', -1, 64),
			want,
		} {
			out, err := canonjson.Canonicalize([]byte(in), canonjson.Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", in, err)
			}
			if string(out) != want {
				t.Fatalf("Canonicalize(%s) = %s, want ES6 %s (float %v)", in, out, want, f)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`""`, `""`},
		{`"\/\"\\"`, `"/\"\\"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{`"\u0001\u001F\u001f\u000b"`, `"\u0001\u001f\u001f\u000b"`},
		{`"\u0020\u0041\u007f\u007F"`, "\" A\x7f\x7f\""},
		{`"\u00e9\u00E9é"`, `"ééé"`},
		{`"</script>\u003c/script\u003e"`, `"</script></script>"`},
		{`"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"\"\u2028\"", "\"\u2028\""},
		{`"\ud83d\ude02"`, `"😂"`},
		{`"\uD83D\uDE02"`, `"😂"`},
		{`"😂"`, `"😂"`},
		{`"\udbff\udfff"`, "\"\U0010ffff\""},
		{`"\ud800\udc00"`, "\"\U00010000\""},
		{`"\ufffe\uffff"`, "\"\ufffe\uffff\""},
		{`"\u0022\u005c"`, `"\"\\"`},
		{"\"\x7f\"", "\"\x7f\""},
	}
	for _, tt := range tests {
		if got := canon(t, tt.in); got != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestStructure(t *testing.T) {
	tests := []struct{ in, want string }{
		{" \t\r\n null \n", "null"},
		{"true", "true"},
		{"false", "false"},
		{"[]", "[]"},
		{"{}", "{}"},
		{"[ ]", "[]"},
		{"{ }", "{}"},
		{`[1, "a", null, true, false, {}, []]`, `[1,"a",null,true,false,{},[]]`},
		// Array order is significant.
		{`[3,1,2]`, `[3,1,2]`},
		// Key order is not.
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":2,"b":1}`, `{"a":2,"b":1}`},
		{`{"b":{"d":1,"c":2},"a":[{"z":0,"y":1}]}`, `{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}`},
		// Keys sort by their unescaped value.
		{`{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{`{"\"":1,"A":2}`, `{"\"":1,"A":2}`},
		{`{"A":2,"\"":1}`, `{"\"":1,"A":2}`},
		{`{"\\":1,"]":2,"[":3}`, `{"[":3,"\\":1,"]":2}`},
		{`{"\n":1,"\u0001":2," ":3}`, `{"\u0001":2,"\n":1," ":3}`},
		{`{"aa":1,"a":2,"":3}`, `{"":3,"a":2,"aa":1}`},
		// UTF-16 order: U+1F600 (D83D DE00) sorts before U+FB33, unlike code point order.
		{"{\"\ufb33\":1,\"\U0001F600\":2,\"\u00f6\":3}", "{\"\u00f6\":3,\"\U0001F600\":2,\"\ufb33\":1}"},
		{"{\"\uE000\":1,\"\U00010000\":2,\"\uD7FF\":3}", "{\"\uD7FF\":3,\"\U00010000\":2,\"\uE000\":1}"},
		{"{\"x\ue000\":1,\"x\U00010000\":2}", "{\"x\U00010000\":2,\"x\ue000\":1}"},
	}
	for _, tt := range tests {
		if got := canon(t, tt.in); got != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	// Every permutation of members gives the same output.
	members := []string{`"b":[2,1]`, `"a":{"y":1,"x":2}`, `"\u00e9":"e"`, `"A":null`, `"😀":0`, `"\uff21":1`}
	want := canon(t, "{"+strings.Join(members, ",")+"}")
	var permute func(int)
	permute = func(i int) {
		if i == len(members) {
			if got := canon(t, "{"+strings.Join(members, ",")+"}"); got != want {
				t.Fatalf("member order changed output: %s vs %s", got, want)
			}
			return
		}
		for j := i; j < len(members); j++ {
			members[i], members[j] = members[j], members[i]
			permute(i + 1)
			members[i], members[j] = members[j], members[i]
		}
	}
	permute(0)
	if want != "{\"A\":null,\"a\":{\"x\":2,\"y\":1},\"b\":[2,1],\"é\":\"e\",\"😀\":0,\"Ａ\":1}" {
		t.Fatalf("unexpected canonical object %s", want)
	}
}

func TestLargeObjectSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	var in strings.Builder
	in.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			in.WriteString(",")
		}
		in.WriteString(`"` + k + `":{"v":` + k[1:] + `,"u":[` + k[1:] + `]}`)
	}
	in.WriteString("}")
	slices.Sort(keys)
	var want strings.Builder
	want.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			want.WriteString(",")
		}
		want.WriteString(`"` + k + `":{"u":[` + k[1:] + `],"v":` + k[1:] + `}`)
	}
	want.WriteString("}")
	if got := canon(t, in.String()); got != want.String() {
		t.Fatalf("large object mis-sorted:\n got %.200s\nwant %.200s", got, want.String())
	}
}

func TestRejections(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, in string
		rule     canonjson.Rule
		offset   int // -1: don't check
	}{
		{"empty", "", canonjson.RuleSyntax, 0},
		{"whitespace only", "  \n", canonjson.RuleSyntax, 3},
		{"trailing data", "1 2", canonjson.RuleSyntax, 2},
		{"trailing bracket", "{}}", canonjson.RuleSyntax, 2},
		{"two values", `{"a":1}{"b":2}`, canonjson.RuleSyntax, 7},
		{"leading zero", "01", canonjson.RuleSyntax, 0},
		{"leading zero negative", "-012", canonjson.RuleSyntax, 1},
		{"leading zeros", "00", canonjson.RuleSyntax, 0},
		{"plus sign", "+1", canonjson.RuleSyntax, 0},
		{"leading dot", ".5", canonjson.RuleSyntax, 0},
		{"trailing dot", "1.", canonjson.RuleSyntax, 2},
		{"trailing dot exp", "1.e5", canonjson.RuleSyntax, 2},
		{"bare minus", "-", canonjson.RuleSyntax, 1},
		{"minus space", "- 1", canonjson.RuleSyntax, 1},
		{"empty exponent", "1e", canonjson.RuleSyntax, 2},
		{"signed empty exponent", "1e+", canonjson.RuleSyntax, 3},
		{"double dot", "1.2.3", canonjson.RuleSyntax, 3},
		{"hex", "0x10", canonjson.RuleSyntax, 1},
		{"NaN", "NaN", canonjson.RuleSyntax, 0},
		{"Infinity", "Infinity", canonjson.RuleSyntax, 0},
		{"-Infinity", "-Infinity", canonjson.RuleSyntax, 1},
		{"nan in array", "[1,NaN]", canonjson.RuleSyntax, 3},
		{"True", "True", canonjson.RuleSyntax, 0},
		{"truncated literal", "tru", canonjson.RuleSyntax, 0},
		{"literal suffix", "nullx", canonjson.RuleSyntax, 4},
		{"trailing comma array", "[1,]", canonjson.RuleSyntax, 3},
		{"trailing comma object", `{"a":1,}`, canonjson.RuleSyntax, 7},
		{"leading comma", "[,1]", canonjson.RuleSyntax, 1},
		{"missing comma", "[1 2]", canonjson.RuleSyntax, 3},
		{"missing colon", `{"a" 1}`, canonjson.RuleSyntax, 5},
		{"unquoted key", `{a:1}`, canonjson.RuleSyntax, 1},
		{"number key", `{1:1}`, canonjson.RuleSyntax, 1},
		{"single quotes", `'a'`, canonjson.RuleSyntax, 0},
		{"unclosed array", "[1", canonjson.RuleSyntax, 2},
		{"unclosed object", `{"a":1`, canonjson.RuleSyntax, 6},
		{"mismatched close", `[1}`, canonjson.RuleSyntax, 2},
		{"unclosed string", `"abc`, canonjson.RuleSyntax, 0},
		{"raw newline in string", "\"a\nb\"", canonjson.RuleSyntax, 2},
		{"raw tab in string", "\"a\tb\"", canonjson.RuleSyntax, 2},
		{"raw NUL in string", "\"a\x00b\"", canonjson.RuleSyntax, 2},
		{"raw NUL outside", "\x00", canonjson.RuleSyntax, 0},
		{"bad escape", `"\x41"`, canonjson.RuleSyntax, 1},
		{"short unicode escape", `"\u12"`, canonjson.RuleSyntax, 1},
		{"bad hex", `"\u12g4"`, canonjson.RuleSyntax, 1},
		{"escape at end", `"\`, canonjson.RuleSyntax, 1},
		{"BOM", "\ufeff{}", canonjson.RuleSyntax, 0},
		{"NBSP whitespace", "[1,\u00a02]", canonjson.RuleSyntax, 3},
		{"comment", "[1 /* c */]", canonjson.RuleSyntax, 3},

		{"invalid utf8 in string", "\"a\xffb\"", canonjson.RuleUTF8, 2},
		{"invalid utf8 outside", "[1]\xc3", canonjson.RuleUTF8, 3},
		{"truncated utf8", "\"\xe2\x82\"", canonjson.RuleUTF8, 1},
		{"overlong utf8", "\"\xc0\xaf\"", canonjson.RuleUTF8, 1},
		{"utf8 encoded surrogate", "\"\xed\xa0\x80\"", canonjson.RuleUTF8, 1},
		{"above U+10FFFF", "\"\xf4\x90\x80\x80\"", canonjson.RuleUTF8, 1},
		{"invalid utf8 key", "{\"\x80\":1}", canonjson.RuleUTF8, 2},

		{"duplicate key", `{"a":1,"a":2}`, canonjson.RuleDuplicateKey, 7},
		{"duplicate key same value", `{"a":1,"b":0,"a":1}`, canonjson.RuleDuplicateKey, 13},
		{"duplicate after unescape", `{"a":1,"\u0061":2}`, canonjson.RuleDuplicateKey, 7},
		{"duplicate both escaped", `{"\u00e9":1,"é":2}`, canonjson.RuleDuplicateKey, 12},
		{"duplicate escaped solidus", `{"/":1,"\/":2}`, canonjson.RuleDuplicateKey, 7},
		{"duplicate surrogate pair", "{\"\\ud83d\\ude00\":1,\"\U0001F600\":2}", canonjson.RuleDuplicateKey, 18},
		{"duplicate nested", `{"a":{"x":1,"y":2,"x":3}}`, canonjson.RuleDuplicateKey, 18},
		{"duplicate empty key", `{"":1,"":2}`, canonjson.RuleDuplicateKey, 6},
		{"earliest duplicate reported", `{"b":1,"a":1,"b":2,"a":2}`, canonjson.RuleDuplicateKey, 13},

		{"lone high surrogate", `"\ud800"`, canonjson.RuleLoneSurrogate, 1},
		{"lone high then text", `"\ud800abc"`, canonjson.RuleLoneSurrogate, 1},
		{"high then high", `"\ud800\ud800"`, canonjson.RuleLoneSurrogate, 1},
		{"high then non-surrogate", `"\ud83d\u0041"`, canonjson.RuleLoneSurrogate, 1},
		{"high then raw low", "\"\\ud83d\xed\xb8\x80\"", canonjson.RuleUTF8, 7},
		{"lone low surrogate", `"\udc00"`, canonjson.RuleLoneSurrogate, 1},
		{"reversed pair", `"\ude02\ud83d"`, canonjson.RuleLoneSurrogate, 1},
		{"lone surrogate in key", `{"x\udfff":1}`, canonjson.RuleLoneSurrogate, 3},
		{"high at end of string", `"ab\udbff"`, canonjson.RuleLoneSurrogate, 3},

		{"null escape", `"\u0000"`, canonjson.RuleNullChar, 1},
		{"null escape in key", `{"a\u0000":1}`, canonjson.RuleNullChar, 3},
		{"null escape in middle", `["ok","x\u0000y"]`, canonjson.RuleNullChar, 8},

		{"huge exponent", "1e999999", canonjson.RuleNumberRange, 0},
		{"tiny exponent", "1e-999999", canonjson.RuleNumberRange, 0},
		{"negative huge", "[-1e999999]", canonjson.RuleNumberRange, 1},
		{"weight limit", "1e131072", canonjson.RuleNumberRange, 0},
		{"weight limit fraction", "0.1e131073", canonjson.RuleNumberRange, 0},
		{"weight limit digits", "12345e131068", canonjson.RuleNumberRange, 0},
		{"integer digits", "1" + strings.Repeat("0", 131072), canonjson.RuleNumberRange, 0},
		{"scale limit", "1e-16384", canonjson.RuleNumberRange, 0},
		{"scale limit 10e", "10e-16384", canonjson.RuleNumberRange, 0},
		{"scale limit 1.5e", "1.5e-16383", canonjson.RuleNumberRange, 0},
		{"scale limit zero", "0e-16384", canonjson.RuleNumberRange, 0},
		{"scale limit trailing zeros", "1." + strings.Repeat("0", 16384), canonjson.RuleNumberRange, 0},
		{"scale limit fraction", "0." + strings.Repeat("0", 16383) + "1", canonjson.RuleNumberRange, 0},
		{"scale limit fraction zero", "0." + strings.Repeat("0", 16384), canonjson.RuleNumberRange, 0},
		{"zero exponent limit", "0e1073741823", canonjson.RuleNumberRange, 0},
		{"zero exponent overflow", "0e99999999999999999999999", canonjson.RuleNumberRange, 0},
		{"number range in object", `{"a":[1,1e-20000]}`, canonjson.RuleNumberRange, 8},

		{"too deep", deep(65), canonjson.RuleDepth, 64},
		{"too deep objects", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), canonjson.RuleDepth, 64 * 5},
		{"too deep unterminated", strings.Repeat("[", 100000), canonjson.RuleDepth, 64},

		{"too large", `"` + strings.Repeat("x", 1<<20) + `"`, canonjson.RuleSize, -1},
		{"too large numbers", "[" + strings.Repeat("1e20,", 60000) + "0]", canonjson.RuleSize, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := canonjson.Canonicalize([]byte(tt.in), canonjson.Limits{})
			if err == nil {
				t.Fatalf("accepted %.80q as %.80q, want %s", tt.in, out, tt.rule)
			}
			if out != nil {
				t.Errorf("output %q returned with error", out)
			}
			var ce *canonjson.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *canonjson.Error", err, err)
			}
			if ce.Rule != tt.rule {
				t.Fatalf("rule %s (%v), want %s", ce.Rule, err, tt.rule)
			}
			if tt.offset >= 0 && ce.Offset != tt.offset {
				t.Errorf("offset %d (%v), want %d", ce.Offset, err, tt.offset)
			}
			msg := err.Error()
			if !strings.Contains(msg, string(tt.rule)) || !strings.Contains(msg, "byte offset "+strconv.Itoa(ce.Offset)) {
				t.Errorf("message %q lacks rule or offset", msg)
			}
		})
	}
}

func TestNumberRangeBoundariesAccepted(t *testing.T) {
	for _, in := range []string{
		"1e131071", "9.9999e131071", "99999e131067", "0.0001e131075", "-1e131071",
		"1" + strings.Repeat("0", 131071),
		"1e-16383", "-1e-16383", "1e-0016383", "0e-16383", "0.0e-16382",
		"0." + strings.Repeat("0", 16382) + "1",
		"1." + strings.Repeat("0", 16383),
		"1." + strings.Repeat("0", 20000) + "e3617",
		"0." + strings.Repeat("0", 16383) + "1e2",
		"0e1073741822", "0.0e1073741822", "0e+1073741822", "0e99999", "-0e-16383",
	} {
		if _, err := canonjson.Canonicalize([]byte(in), canonjson.Limits{}); err != nil {
			t.Errorf("Canonicalize(%.40s...) rejected: %v", in, err)
		}
	}
}

func TestLimits(t *testing.T) {
	deep := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	check := func(in []byte, lim canonjson.Limits, want canonjson.Rule) {
		t.Helper()
		_, err := canonjson.Canonicalize(in, lim)
		var ce *canonjson.Error
		switch {
		case want == "" && err != nil:
			t.Errorf("%.40s... with %+v: unexpected error %v", in, lim, err)
		case want != "" && (!errors.As(err, &ce) || ce.Rule != want):
			t.Errorf("%.40s... with %+v: got %v, want %s", in, lim, err, want)
		}
	}
	check([]byte("1"), canonjson.Limits{MaxDepth: 1}, "")
	check([]byte("[]"), canonjson.Limits{MaxDepth: 1}, "")
	check([]byte("[[]]"), canonjson.Limits{MaxDepth: 1}, canonjson.RuleDepth)
	check([]byte(`[{}]`), canonjson.Limits{MaxDepth: 1}, canonjson.RuleDepth)
	check(deep(64), canonjson.Limits{}, "")
	check(deep(65), canonjson.Limits{}, canonjson.RuleDepth)
	check(deep(1000), canonjson.Limits{MaxDepth: 1000}, "")
	check(deep(1001), canonjson.Limits{MaxDepth: 1000}, canonjson.RuleDepth)
	check(deep(200000), canonjson.Limits{MaxDepth: 1 << 30}, "")

	// MaxBytes is about the canonical output, exactly.
	check([]byte(`"abc"`), canonjson.Limits{MaxBytes: 5}, "")
	check([]byte(`"abcd"`), canonjson.Limits{MaxBytes: 5}, canonjson.RuleSize)
	check([]byte(`[1]`), canonjson.Limits{MaxBytes: 3}, "")
	check([]byte(`[12]`), canonjson.Limits{MaxBytes: 3}, canonjson.RuleSize)
	check([]byte(`{"a":1}`), canonjson.Limits{MaxBytes: 7}, "")
	check([]byte(`{"a":1}`), canonjson.Limits{MaxBytes: 6}, canonjson.RuleSize)
	check([]byte(`1e20`), canonjson.Limits{MaxBytes: 20}, canonjson.RuleSize)
	check([]byte(`1e20`), canonjson.Limits{MaxBytes: 21}, "")
	check([]byte(`"\u0001"`), canonjson.Limits{MaxBytes: 7}, canonjson.RuleSize)
	check([]byte(`"\u0001"`), canonjson.Limits{MaxBytes: 8}, "")
	// Whitespace and escapes may make the input larger than the limit.
	padded := "[" + strings.Repeat(" ", 2<<20) + `"\u0041\u0042"` + strings.Repeat("\n", 100) + "]"
	check([]byte(padded), canonjson.Limits{MaxBytes: 6}, "")
	check([]byte(padded), canonjson.Limits{MaxBytes: 5}, canonjson.RuleSize)
	exact := `"` + strings.Repeat("y", canonjson.DefaultMaxBytes-2) + `"`
	check([]byte(exact), canonjson.Limits{}, "")
	check([]byte(exact[:len(exact)-1]+`y"`), canonjson.Limits{}, canonjson.RuleSize)
	check([]byte(" "+exact+" "), canonjson.Limits{}, "")
}

func TestErrorMessage(t *testing.T) {
	_, err := canonjson.Canonicalize([]byte(`{"a":1,"a":2}`), canonjson.Limits{})
	var ce *canonjson.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %T", err)
	}
	want := `canonjson: duplicate_key at byte offset 7: duplicate object key "a" (send each key at most once per object)`
	if err.Error() != want {
		t.Fatalf("message\n got %s\nwant %s", err, want)
	}
	wrapped := errors.Join(errors.New("payload"), err)
	if !errors.As(wrapped, &ce) || ce.Rule != canonjson.RuleDuplicateKey {
		t.Fatalf("errors.As through wrapping failed")
	}
}

func TestOutputNotShared(t *testing.T) {
	a, _ := canonjson.Canonicalize([]byte(`{"b":1,"a":2}`), canonjson.Limits{})
	b, _ := canonjson.Canonicalize([]byte(`{"d":3,"c":4}`), canonjson.Limits{})
	if string(a) != `{"a":2,"b":1}` || string(b) != `{"c":4,"d":3}` {
		t.Fatalf("outputs clobbered: %s %s", a, b)
	}
}

// TestNumberRangeAgainstPostgres checks the numeric range rule, and that
// canonical numbers keep their value, against a real PostgreSQL through psql:
// the test harness's database, or PGINBOX_CANONJSON_PSQL's connection string
// (for example "host=127.0.0.1 user=postgres dbname=postgres") when set.
func TestNumberRangeAgainstPostgres(t *testing.T) {
	conn := os.Getenv("PGINBOX_CANONJSON_PSQL")
	if conn == "" {
		conn = inboxtest.EmptyDatabase(t)
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("psql is needed to compare with PostgreSQL: install the PostgreSQL client (apt-get install postgresql-client): %v", err)
	}
	z := func(n int) string { return strings.Repeat("0", n) }
	cases := []string{
		"1e1000", "1e1001", "1e131071", "1e131072", "-1e131071", "-1e131072",
		"9.9999e131071", "99999e131067", "99999e131068", "0.0001e131075", "0.0001e131076",
		"0.1e131072", "0.1e131073", "1" + z(131071), "1" + z(131072),
		"1e-16383", "1e-16384", "-1e-16383", "-1e-16384", "10e-16384", "1.5e-16382", "1.5e-16383",
		"0e-16383", "0e-16384", "0.0e-16382", "0.0e-16383", "-0e-16384",
		"0." + z(16382) + "1", "0." + z(16383) + "1", "1." + z(16383), "1." + z(16384),
		"0." + z(16383), "0." + z(16384), "1." + z(20000) + "e3616", "1." + z(20000) + "e3617",
		"0." + z(16384) + "1e1", "0." + z(16383) + "1e2", "1" + z(200000) + "e-70000",
		"0e1073741822", "0e1073741823", "0e-1073741823", "0e99999999999999999999", "0.0e1073741822",
		"1e999999", "1e-999999", "1e-0016383", "1e-0016384",
		"123456789012345678901234567890", "9007199254740993", "333333333.33333329", "-0", "4.50",
	}
	psql := func(sql string) (string, error) {
		cmd := exec.Command("psql", conn, "-XAtq", "-v", "ON_ERROR_STOP=1", "-f", "-")
		cmd.Stdin = strings.NewReader(sql)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, in := range cases {
		label := in
		if len(label) > 40 {
			label = label[:20] + "...(" + strconv.Itoa(len(in)) + " bytes)"
		}
		out, err := canonjson.Canonicalize([]byte(in), canonjson.Limits{MaxBytes: 1 << 30})
		pgOut, pgErr := psql("select '" + in + "'::jsonb is not null")
		pgRejects := pgErr != nil
		if pgRejects && !strings.Contains(pgOut, "value overflows numeric format") {
			t.Fatalf("%s: psql failed unexpectedly: %v: %s", label, pgErr, pgOut)
		}
		var ce *canonjson.Error
		weReject := errors.As(err, &ce) && ce.Rule == canonjson.RuleNumberRange
		if err != nil && !weReject {
			t.Fatalf("%s: unexpected error %v", label, err)
		}
		if weReject != pgRejects {
			t.Errorf("%s: canonjson rejects=%v (%v), PostgreSQL rejects=%v (%s)", label, weReject, err, pgRejects, strings.TrimSpace(pgOut))
			continue
		}
		if err == nil {
			eq, pgErr := psql("select '" + in + "'::jsonb = '" + string(out) + "'::jsonb")
			if pgErr != nil || strings.TrimSpace(eq) != "t" {
				t.Errorf("%s: PostgreSQL says canonical %.40s differs: %s %v", label, out, eq, pgErr)
			}
		}
	}

	// Random numbers around the boundaries, checked in one session: for each
	// number PostgreSQL reports "ERR" or whether it equals our canonical form.
	r := rand.New(rand.NewPCG(15, 20))
	digits := func(n int, lead bool) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		if lead && n > 0 && b[0] == '0' {
			b[0] = '1' + byte(r.IntN(9))
		}
		return string(b)
	}
	var nums []string
	for range 3000 {
		var m string
		switch r.IntN(4) {
		case 0:
			m = "0"
		case 1:
			m = digits(1+r.IntN(6), true)
		default:
			m = []string{"0", digits(1+r.IntN(3), true)}[r.IntN(2)]
			frac := digits(r.IntN(6), false)
			switch r.IntN(3) {
			case 0:
				frac = z(16370+r.IntN(20)) + frac
			case 1:
				frac += z(r.IntN(4))
			}
			if frac == "" {
				frac = "0"
			}
			m += "." + frac
		}
		var e int
		switch r.IntN(5) {
		case 0:
			e = -16383 - 8 + r.IntN(16)
		case 1:
			e = 131071 - 8 + r.IntN(16)
		case 2:
			e = 1073741822 - 2 + r.IntN(4)
			if r.IntN(2) == 0 {
				e = -e
			}
		case 3:
			e = r.IntN(40) - 20
		default: // no exponent
			nums = append(nums, []string{"", "-"}[r.IntN(2)]+m)
			continue
		}
		nums = append(nums, []string{"", "-"}[r.IntN(2)]+m+[]string{"e", "E"}[r.IntN(2)]+strconv.Itoa(e))
	}
	var sql strings.Builder
	sql.WriteString("create function pg_temp.chk(n text, c text) returns text language plpgsql as $f$ " +
		"begin return (n::jsonb = c::jsonb)::text; exception when others then return 'ERR ' || sqlerrm; end $f$;\n")
	want := make([]string, len(nums))
	for i, n := range nums {
		out, err := canonjson.Canonicalize([]byte(n), canonjson.Limits{MaxBytes: 1 << 30})
		c := string(out)
		var ce *canonjson.Error
		switch {
		case err == nil:
			want[i] = "true"
		case errors.As(err, &ce) && ce.Rule == canonjson.RuleNumberRange:
			want[i] = "ERR value overflows numeric format"
			c = "0"
		default:
			t.Fatalf("%.40s: unexpected error %v", n, err)
		}
		sql.WriteString("select pg_temp.chk('" + n + "', '" + c + "');\n")
	}
	got, err := psql(sql.String())
	if err != nil {
		t.Fatalf("psql: %v: %.500s", err, got)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != len(nums) {
		t.Fatalf("psql returned %d lines for %d numbers: %.500s", len(lines), len(nums), got)
	}
	rejected := 0
	for i, n := range nums {
		if lines[i] != want[i] {
			t.Errorf("%.60s: PostgreSQL %q, canonjson %q", n, lines[i], want[i])
		}
		if strings.HasPrefix(want[i], "ERR") {
			rejected++
		}
	}
	t.Logf("%d random boundary numbers agree with PostgreSQL (%d rejected by both)", len(nums), rejected)
}

// semanticallyEqual decodes both documents and compares them, numbers by
// exact decimal value.
func semanticallyEqual(a, b []byte) error {
	va, err := decodeUseNumber(a)
	if err != nil {
		return err
	}
	vb, err := decodeUseNumber(b)
	if err != nil {
		return err
	}
	return sameValue(va, vb)
}

func decodeUseNumber(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func sameValue(a, b any) error {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return errors.New("object mismatch")
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok {
				return errors.New("missing key " + strconv.Quote(k))
			}
			if err := sameValue(v, w); err != nil {
				return err
			}
		}
		return nil
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return errors.New("array mismatch")
		}
		for i := range a {
			if err := sameValue(a[i], bs[i]); err != nil {
				return err
			}
		}
		return nil
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok || normalizeNumber(string(a)) != normalizeNumber(string(bn)) {
			return errors.New("number mismatch " + string(a) + " vs " + string(bn))
		}
		return nil
	default:
		if a != b {
			return errors.New("scalar mismatch")
		}
		return nil
	}
}

// normalizeNumber returns a JSON number as "sign digits e exponent" with the
// digits stripped of leading and trailing zeros.
func normalizeNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, _ := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if expPart != "" {
		e, err := strconv.Atoi(expPart)
		if err != nil {
			return "bad exponent " + expPart
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	trimmed = strings.TrimLeft(trimmed, "0")
	if trimmed == "" {
		return "0"
	}
	sign := "+"
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp)
}

// keysSorted checks that every object in a canonical document lists its keys
// in strictly increasing UTF-16 code unit order.
func keysSorted(doc []byte) error {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	type level struct {
		obj     bool
		wantKey bool
		last    []uint16
		has     bool
	}
	var stack []level
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				u := utf16.Encode([]rune(k))
				if stack[n-1].has && slices.Compare(stack[n-1].last, u) >= 0 {
					return errors.New("keys out of order at " + strconv.Quote(k))
				}
				stack[n-1].last, stack[n-1].has, stack[n-1].wantKey = u, true, false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].wantKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].wantKey = true
			}
		}
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, in := range jcsInputs(f) {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "null", "true", "false", "0", "-0", "1.0", "1e0", "10e-1", "4.50", "2e-3", "1E30",
		"0.000000000000000000000000001", "9007199254740993", "333333333.33333329", "1e21", "1e-7",
		"-1.50e2", "123456789012345678901234567890", "1e999999", "1e-999999", "0e1073741823",
		"01", "+1", ".5", "1.", "NaN", "Infinity", "[1,]", `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`"\ud83d\ude02"`, `"\ud800"`, `"\udc00"`, `"\u0000"`, "\"\xff\"", "\"\x00\"",
		`{"b":[1,{"d":null,"c":"\u00e9"}],"a":"\/\b\f\n\r\t\u0001\u007f"}`,
		"{\"\ufb33\":1,\"\U0001F600\":2}", "[[[[[[[[[[]]]]]]]]]]", " [ 1 , 2 ] ", "\ufeff1",
		`{"":{"":{"":[]}}}`, `"</script>"`, `[1e131071,1e-16383]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := canonjson.Canonicalize(src, canonjson.Limits{MaxDepth: 16, MaxBytes: 1 << 16})
		if err != nil {
			var ce *canonjson.Error
			if !errors.As(err, &ce) || ce.Rule == "" {
				t.Fatalf("error %T %v is not a *canonjson.Error with a rule", err, err)
			}
			if out != nil {
				t.Fatalf("output returned with error")
			}
			if ce.Offset < 0 || ce.Offset > len(src) {
				t.Fatalf("offset %d outside input of %d bytes", ce.Offset, len(src))
			}
			if ce.Rule == canonjson.RuleSyntax && json.Valid(src) {
				t.Fatalf("encoding/json accepts %q but we report a syntax error: %v", src, err)
			}
			return
		}
		if !json.Valid(src) {
			t.Fatalf("accepted input that encoding/json rejects: %q", src)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		again, err := canonjson.Canonicalize(out, canonjson.Limits{MaxDepth: 16, MaxBytes: 1 << 16})
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", src, out, again, err)
		}
		if err := semanticallyEqual(src, out); err != nil {
			t.Fatalf("meaning changed: %q -> %q: %v", src, out, err)
		}
		if err := keysSorted(out); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
	})
}

// orderPayload is a realistic small inbox payload (268 bytes).
const orderPayload = `{"type":"order.created","id":"evt_01J9ZK3T6M","data":{"order_id":"ord_48213",` +
	`"customer":{"email":"ana@example.com","name":"Ana Lima"},"items":[{"sku":"TSHIRT-M",` +
	`"qty":2,"price":19.90},{"sku":"MUG-WHT","qty":1,"price":8.50}],"total":48.30,"currency":"EUR","paid":true}}`

// bigPayload builds a pretty-printed order of about 10 KiB (10.2 KB) with unsorted keys,
// escapes and non-ASCII text.
func bigPayload() []byte {
	var b strings.Builder
	b.WriteString("{\n  \"type\": \"order.created\",\n  \"id\": \"evt_01J9ZK3T6M\",\n  \"data\": {\n    \"order_id\": \"ord_48213\",\n")
	b.WriteString("    \"note\": \"Entregar na portaria \\u2013 \\\"fr\\u00e1gil\\\"\\nObrigada!\",\n    \"items\": [\n")
	for i := 0; i < 64; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		n := strconv.Itoa(i)
		b.WriteString(`      {"sku": "SKU-` + n + `-XL", "qty": ` + strconv.Itoa(i%5+1) +
			`, "price": ` + strconv.Itoa(i*7%100) + `.` + strconv.Itoa(10+i%90) +
			`, "name": "Camiseta número ` + n + ` – algodão", "tags": ["summer", "sale", "` + n + `"], "weight_kg": 0.` + strconv.Itoa(100+i) + `e1}`)
	}
	b.WriteString("\n    ],\n    \"total\": 1234.50,\n    \"currency\": \"EUR\",\n    \"paid\": true,\n    \"coupon\": null\n  },\n  \"created_at\": \"2024-05-17T10:21:33Z\"\n}\n")
	return []byte(b.String())
}

func BenchmarkCanonicalize(b *testing.B) {
	for _, bc := range []struct {
		name string
		src  []byte
	}{
		{"order_" + strconv.Itoa(len(orderPayload)) + "B", []byte(orderPayload)},
		{"order_" + strconv.Itoa(len(bigPayload())) + "B", bigPayload()},
	} {
		if _, err := canonjson.Canonicalize(bc.src, canonjson.Limits{}); err != nil {
			b.Fatalf("%s: %v", bc.name, err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.src)))
			for b.Loop() {
				if _, err := canonjson.Canonicalize(bc.src, canonjson.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
