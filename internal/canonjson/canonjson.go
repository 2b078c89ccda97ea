// Package canonjson validates JSON strictly and produces its canonical form,
// which pginbox hashes to fingerprint inbox payloads.
//
// The canonical form is RFC 8785 (JSON Canonicalization Scheme) with one
// deliberate difference: numbers are never rounded through float64. The
// ES6 Number.prototype.toString layout that RFC 8785 prescribes is applied to
// the number's exact decimal digits instead, so 9007199254740993 and
// 9007199254740992 stay distinct and 333333333.33333329 is kept as written.
// For every number that already is the shortest round-trip form of a float64
// the output is identical to RFC 8785.
//
// Input that PostgreSQL jsonb would refuse, or that is ambiguous, is rejected
// with an *Error naming the rule; input is never silently repaired.
package canonjson

import (
	"encoding/binary"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Default limits, used when the corresponding Limits field is zero.
const (
	DefaultMaxDepth = 64
	DefaultMaxBytes = 1 << 20
)

// Limits bounds the accepted documents. A zero (or negative) field means the
// default for that field.
type Limits struct {
	// MaxDepth is the deepest allowed nesting of arrays and objects. A scalar
	// top-level value has depth 0, [] has depth 1, [[]] depth 2.
	MaxDepth int
	// MaxBytes is the largest allowed size of the canonical output in bytes,
	// with every number counted at the length of its plain decimal form (how
	// PostgreSQL's numeric prints it: 1e131071 counts 131072 bytes), so the
	// limit also bounds what the database produces if the document is ever
	// rendered as jsonb. It applies to the output, not the input: input padded
	// with whitespace or escapes may be larger and still be accepted.
	MaxBytes int
}

// Rule names the rule an input broke.
type Rule string

// The rules Canonicalize enforces.
const (
	RuleSyntax        Rule = "invalid_json"        // not a single RFC 8259 JSON value
	RuleUTF8          Rule = "invalid_utf8"        // bytes that are not valid UTF-8
	RuleDuplicateKey  Rule = "duplicate_key"       // same key twice in one object (compared after unescaping)
	RuleLoneSurrogate Rule = "lone_surrogate"      // \uD800-\uDFFF escape not part of a valid pair
	RuleNullChar      Rule = "null_character"      // \u0000, which PostgreSQL jsonb cannot store
	RuleNumberRange   Rule = "number_out_of_range" // number PostgreSQL numeric (jsonb) cannot store
	RuleDepth         Rule = "too_deep"            // nesting deeper than Limits.MaxDepth
	RuleSize          Rule = "too_large"           // canonical output (numbers at plain-decimal length) larger than Limits.MaxBytes
)

// hint tells the sender what to do about a broken rule.
func (r Rule) hint() string {
	switch r {
	case RuleSyntax:
		return "send exactly one well-formed RFC 8259 JSON value"
	case RuleUTF8:
		return "encode the payload as UTF-8"
	case RuleDuplicateKey:
		return "send each key at most once per object"
	case RuleLoneSurrogate:
		return "write characters outside the BMP as a \\uD800-\\uDBFF + \\uDC00-\\uDFFF pair or as raw UTF-8"
	case RuleNullChar:
		return "remove U+0000 from strings; PostgreSQL jsonb cannot store it"
	case RuleNumberRange:
		return "PostgreSQL numeric allows at most 131072 digits before and 16383 digits after the decimal point; send such values as strings"
	case RuleDepth:
		return "flatten the document"
	case RuleSize:
		return "send a smaller payload"
	}
	return "fix the payload"
}

// Error is the error returned for every rejected input.
type Error struct {
	Rule   Rule   // which rule was broken
	Offset int    // byte offset in the input where the problem was detected
	Detail string // what exactly is wrong
}

func (e *Error) Error() string {
	return "canonjson: " + string(e.Rule) + " at byte offset " + strconv.Itoa(e.Offset) +
		": " + e.Detail + " (" + e.Rule.hint() + ")"
}

// PostgreSQL 15 numeric limits as they apply to jsonb input, measured against
// PostgreSQL 15.20 (select '<number>'::jsonb). For a JSON number written with
// F digits after the decimal point and exponent E (0 without an exponent part):
//
//   - |E| must be below 1073741823 (INT_MAX/2): 0e1073741822 is accepted,
//     0e1073741823 and 0e99999999999999999999 are rejected even though the
//     value is zero.
//   - The display scale max(0, F-E) must be at most 16383: 1e-16383,
//     0.<16382 zeros>1, 1.<16383 zeros> and 0e-16383 are accepted; 1e-16384,
//     10e-16384, 1.5e-16383, 1.<16384 zeros>, 0e-16384 and 1e-999999 are
//     rejected. Trailing zeros count, and so do the digits of zero.
//   - A non-zero value must be below 10^131072, i.e. its first significant
//     digit may stand at most at 10^131071: 1e131071, 9.9999e131071,
//     0.0001e131075 and a 131072-digit integer are accepted; 1e131072,
//     0.1e131073, a 131073-digit integer and 1e999999 are rejected.
//
// All rejections are "ERROR: value overflows numeric format". The canonical
// form of an accepted number never has a larger scale or magnitude than its
// input, so canonical output is always accepted again.
const (
	pgExpLimit     = 1<<30 - 1 // |E| must be < this (INT_MAX/2 = 1073741823)
	pgMaxScale     = 16383     // max display scale (NUMERIC_DSCALE_MAX)
	pgMaxLeadPower = 131071    // max power of ten of the first significant digit (int16 weight: 32767 base-10000 digits)
)

// Canonicalize validates src and returns its canonical form. Every rejection
// is reported as an *Error. The returned slice is newly allocated and owned by
// the caller.
func Canonicalize(src []byte, lim Limits) ([]byte, error) {
	maxDepth, maxBytes := lim.MaxDepth, lim.MaxBytes
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if !utf8.Valid(src) {
		return nil, utf8Error(src)
	}
	size := len(src)
	if size > maxBytes {
		size = maxBytes
	}
	p := parserPool.Get().(*parser)
	p.src = src
	p.maxDepth = maxDepth
	p.maxBytes = maxBytes
	out, err := p.run(make([]byte, 0, size+8))
	p.release()
	if err != nil {
		return nil, err
	}
	return out, nil
}

func utf8Error(src []byte) *Error {
	for i := 0; i < len(src); {
		if src[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			return &Error{Rule: RuleUTF8, Offset: i, Detail: "invalid UTF-8 sequence starting with byte 0x" + hex2(src[i])}
		}
		i += n
	}
	return &Error{Rule: RuleUTF8, Detail: "invalid UTF-8"} // unreachable when called for invalid input
}

const hexDigits = "0123456789abcdef"

func hex2(b byte) string { return string([]byte{hexDigits[b>>4], hexDigits[b&15]}) }

// frame is one open array or object.
type frame struct {
	obj       bool
	sorted    bool // keys so far strictly increasing (objects only)
	bodyStart int  // output offset just after the opening bracket
	memBase   int  // first index in parser.members belonging to this object
	arenaBase int  // length of parser.arena when the object was opened
}

// member is one "key":value pair written to the output of an open object.
type member struct {
	start, end int  // output span of the pair, without separators
	srcOff     int  // input offset of the key
	keyOff     int  // decoded key: src[keyOff:keyOff+keyLen] or arena[...]
	keyLen     int  //
	inArena    bool // key had escapes; decoded form is in the arena
}

type parser struct {
	src      []byte
	pos      int
	maxDepth int
	maxBytes int
	// expansion is how many bytes longer the numbers written so far are in
	// plain decimal than in canonical form; it counts against maxBytes.
	expansion int64
	stack     []frame
	members   []member
	arena     []byte   // decoded keys that contained escapes
	scratch   []byte   // used when reordering object members
	tmp       []member // used when sorting members
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

func (p *parser) release() {
	p.src, p.pos, p.expansion = nil, 0, 0
	p.stack = p.stack[:0]
	p.members = p.members[:0]
	p.arena = p.arena[:0]
	p.scratch = p.scratch[:0]
	p.tmp = p.tmp[:0]
	if cap(p.stack) > 1024 {
		p.stack = nil
	}
	if cap(p.members) > 4096 {
		p.members = nil
	}
	if cap(p.tmp) > 4096 {
		p.tmp = nil
	}
	if cap(p.arena) > 64<<10 {
		p.arena = nil
	}
	if cap(p.scratch) > 64<<10 {
		p.scratch = nil
	}
	parserPool.Put(p)
}

func (p *parser) fail(r Rule, off int, detail string) *Error {
	return &Error{Rule: r, Offset: off, Detail: detail}
}

func (p *parser) tooLarge() *Error {
	if p.expansion > 0 {
		return p.fail(RuleSize, p.pos, "canonical output, with numbers counted at their plain decimal length as PostgreSQL prints them, exceeds the limit of "+strconv.Itoa(p.maxBytes)+" bytes")
	}
	return p.fail(RuleSize, p.pos, "canonical output exceeds the limit of "+strconv.Itoa(p.maxBytes)+" bytes")
}

// syntaxAt reports an unexpected byte (or end of input) at p.pos.
func (p *parser) syntaxAt(expected string) *Error {
	if p.pos >= len(p.src) {
		return p.fail(RuleSyntax, p.pos, "unexpected end of input, expected "+expected)
	}
	c := p.src[p.pos]
	var what string
	switch {
	case c >= 0x20 && c < 0x7f:
		what = "'" + string(rune(c)) + "'"
	case c < utf8.RuneSelf:
		what = "byte 0x" + hex2(c)
	default:
		r, _ := utf8.DecodeRune(p.src[p.pos:])
		what = "character " + strconv.QuoteRune(r)
	}
	return p.fail(RuleSyntax, p.pos, "unexpected "+what+", expected "+expected)
}

func (p *parser) skipWS() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// run parses the whole input, appending the canonical form to out. The
// output is threaded through as a value (not a parser field) so that appends
// need no GC write barriers.
func (p *parser) run(out []byte) ([]byte, *Error) {
	src := p.src
	var err *Error
	for {
		// Parse one value.
		p.skipWS()
		if p.pos >= len(src) {
			return nil, p.syntaxAt("a value")
		}
		switch c := src[p.pos]; c {
		case '{', '[':
			if len(p.stack) >= p.maxDepth {
				return nil, p.fail(RuleDepth, p.pos, "nesting deeper than the limit of "+strconv.Itoa(p.maxDepth))
			}
			closer := c + 2 // '}' or ']'
			out = append(out, c)
			p.pos++
			p.skipWS()
			if p.pos < len(src) && src[p.pos] == closer {
				out = append(out, closer)
				p.pos++
				break // empty container: a complete value
			}
			p.stack = append(p.stack, frame{
				obj:       c == '{',
				sorted:    true,
				bodyStart: len(out),
				memBase:   len(p.members),
				arenaBase: len(p.arena),
			})
			if c == '{' {
				if out, err = p.parseKey(out); err != nil {
					return nil, err
				}
			}
			continue
		case '"':
			if out, _, err = p.parseString(out, false); err != nil {
				return nil, err
			}
		case 't':
			if out, err = p.literal(out, "true"); err != nil {
				return nil, err
			}
		case 'f':
			if out, err = p.literal(out, "false"); err != nil {
				return nil, err
			}
		case 'n':
			if out, err = p.literal(out, "null"); err != nil {
				return nil, err
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if out, err = p.parseNumber(out); err != nil {
				return nil, err
			}
		case '+':
			return nil, p.fail(RuleSyntax, p.pos, "unexpected '+': JSON numbers must not have a leading '+'")
		case '.':
			return nil, p.fail(RuleSyntax, p.pos, "unexpected '.': JSON numbers must start with a digit")
		case 'N', 'I':
			return nil, p.fail(RuleSyntax, p.pos, "unexpected '"+string(rune(c))+"': NaN and Infinity are not JSON values")
		default:
			return nil, p.syntaxAt("a value")
		}

		// A value is complete: close containers until one continues.
		for {
			if int64(len(out))+p.expansion > int64(p.maxBytes) {
				return nil, p.tooLarge()
			}
			n := len(p.stack)
			if n == 0 {
				p.skipWS()
				if p.pos != len(src) {
					return nil, p.syntaxAt("end of input after the top-level value")
				}
				return out, nil
			}
			top := &p.stack[n-1]
			if top.obj {
				p.members[len(p.members)-1].end = len(out)
			}
			p.skipWS()
			closer := byte(']')
			if top.obj {
				closer = '}'
			}
			if p.pos >= len(src) || (src[p.pos] != ',' && src[p.pos] != closer) {
				return nil, p.syntaxAt("',' or '" + string(rune(closer)) + "'")
			}
			if src[p.pos] == ',' {
				out = append(out, ',')
				p.pos++
				if top.obj {
					if out, err = p.parseKey(out); err != nil {
						return nil, err
					}
				}
				break
			}
			if top.obj {
				if !top.sorted {
					if err := p.sortMembers(out, top); err != nil {
						return nil, err
					}
				}
				p.members = p.members[:top.memBase]
				p.arena = p.arena[:top.arenaBase]
			}
			p.stack = p.stack[:n-1]
			out = append(out, closer)
			p.pos++
		}
	}
}

func (p *parser) literal(out []byte, word string) ([]byte, *Error) {
	if len(p.src)-p.pos < len(word) || string(p.src[p.pos:p.pos+len(word)]) != word {
		return nil, p.fail(RuleSyntax, p.pos, "invalid literal, expected "+word)
	}
	p.pos += len(word)
	return append(out, word...), nil
}

func (p *parser) keyBytes(m *member) []byte {
	if m.inArena {
		return p.arena[m.keyOff : m.keyOff+m.keyLen]
	}
	return p.src[m.keyOff : m.keyOff+m.keyLen]
}

// parseKey parses `"key" :` (with surrounding whitespace) inside an object and
// records the member.
func (p *parser) parseKey(out []byte) ([]byte, *Error) {
	p.skipWS()
	if p.pos >= len(p.src) || p.src[p.pos] != '"' {
		return nil, p.syntaxAt("a string key")
	}
	m := member{start: len(out), srcOff: p.pos}
	out, k, err := p.parseString(out, true)
	if err != nil {
		return nil, err
	}
	m.keyOff, m.keyLen, m.inArena = k.off, k.n, k.inArena
	top := &p.stack[len(p.stack)-1]
	if top.sorted && len(p.members) > top.memBase {
		prev := &p.members[len(p.members)-1]
		if compareUTF16(p.keyBytes(prev), p.keyBytes(&m)) >= 0 {
			top.sorted = false
		}
	}
	p.members = append(p.members, m)
	p.skipWS()
	if p.pos >= len(p.src) || p.src[p.pos] != ':' {
		return nil, p.syntaxAt("':' after object key")
	}
	p.pos++
	return append(out, ':'), nil
}

// sortMembers orders the members of the object being closed by key, rejects
// duplicates and rewrites the object body in the output in sorted order.
func (p *parser) sortMembers(out []byte, f *frame) *Error {
	mems := p.members[f.memBase:]
	p.sortByKey(mems)
	dup := -1 // member whose key repeats an earlier one, earliest in the input
	for i := 1; i < len(mems); i++ {
		if string(p.keyBytes(&mems[i-1])) == string(p.keyBytes(&mems[i])) {
			// The sort is stable, so mems[i] comes later in the input.
			if dup < 0 || mems[i].srcOff < mems[dup].srcOff {
				dup = i
			}
		}
	}
	if dup >= 0 {
		key := string(p.keyBytes(&mems[dup]))
		if len(key) > 64 {
			key = key[:64] + "..."
		}
		return p.fail(RuleDuplicateKey, mems[dup].srcOff, "duplicate object key "+strconv.Quote(key))
	}
	body := out[f.bodyStart:]
	p.scratch = append(p.scratch[:0], body...)
	w := f.bodyStart
	for i := range mems {
		if i > 0 {
			out[w] = ','
			w++
		}
		w += copy(out[w:], p.scratch[mems[i].start-f.bodyStart:mems[i].end-f.bodyStart])
	}
	return nil
}

func (p *parser) less(a, b *member) bool {
	return compareUTF16(p.keyBytes(a), p.keyBytes(b)) < 0
}

// sortByKey is a stable sort of m by key: insertion sort on short runs, then
// bottom-up merging through p.tmp. member holds no pointers, so moving
// members costs no write barriers.
func (p *parser) sortByKey(m []member) {
	const run = 12
	n := len(m)
	for lo := 0; lo < n; lo += run {
		r := m[lo:min(lo+run, n)]
		for i := 1; i < len(r); i++ {
			for j := i; j > 0 && p.less(&r[j], &r[j-1]); j-- {
				r[j], r[j-1] = r[j-1], r[j]
			}
		}
	}
	if n <= run {
		return
	}
	p.tmp = append(p.tmp[:0], m...)
	src, dst := m, p.tmp
	for width := run; width < n; width *= 2 {
		for lo := 0; lo < n; lo += 2 * width {
			mid, hi := min(lo+width, n), min(lo+2*width, n)
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if p.less(&src[j], &src[i]) {
					dst[k] = src[j]
					j++
				} else {
					dst[k] = src[i]
					i++
				}
				k++
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
		}
		src, dst = dst, src
	}
	if &src[0] != &m[0] {
		copy(m, src)
	}
}

// compareUTF16 compares two UTF-8 strings by their UTF-16 code units, as
// RFC 8785 requires. UTF-8 byte order equals code point order, which differs
// from UTF-16 order only between U+E000..U+FFFF (lead byte 0xEE or 0xEF) and
// supplementary characters (lead byte 0xF0..0xF4, UTF-16 lead surrogate
// 0xD800..0xDBFF): UTF-16 sorts the supplementary characters first.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		// Equal prefixes put both bytes at the same position of a character,
		// so both are lead bytes or both are continuation bytes (< 0xC0).
		if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
			if x >= 0xF0 {
				return -1
			}
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

type keyRef struct {
	off, n  int
	inArena bool
}

// strPlain marks bytes copied unchanged inside strings: everything except
// '"', '\\' and control characters. Bytes >= 0x80 are plain because the
// input was checked to be valid UTF-8.
var strPlain = func() (t [256]bool) {
	for i := 0x20; i < 256; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// plain8 reports whether none of the 8 bytes in x is '"', '\\' or a control
// character. (v - 0x01..01) & ^v & 0x80..80 is non-zero exactly when some
// byte of v is zero, and (x - n*0x01..01) & ^x & 0x80..80 exactly when some
// byte of x is below n (n <= 0x80); spurious bits can only appear above a
// genuine hit, so the tests are exact as yes/no answers.
func plain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ ('"' * ones)
	bslash := x ^ ('\\' * ones)
	ctl := (x - 0x20*ones) & ^x
	q := (quote - ones) & ^quote
	b := (bslash - ones) & ^bslash
	return (ctl|q|b)&highs == 0
}

// parseString parses the string starting at p.pos and writes its canonical
// form. For keys it also returns where the decoded key is.
func (p *parser) parseString(out []byte, isKey bool) ([]byte, keyRef, *Error) {
	src := p.src
	open := p.pos
	i := open + 1
	chunk := i
	escaped := false
	arenaStart := len(p.arena)
	out = append(out, '"')
	for {
		for i+8 <= len(src) && plain8(binary.LittleEndian.Uint64(src[i:])) {
			i += 8
		}
		for i < len(src) && strPlain[src[i]] {
			i++
		}
		if i >= len(src) {
			return nil, keyRef{}, p.fail(RuleSyntax, open, "unterminated string")
		}
		if len(out)+(i-chunk) > p.maxBytes {
			p.pos = chunk
			return nil, keyRef{}, p.tooLarge()
		}
		out = append(out, src[chunk:i]...)
		if isKey && escaped {
			p.arena = append(p.arena, src[chunk:i]...)
		}
		c := src[i]
		if c == '"' {
			out = append(out, '"')
			p.pos = i + 1
			if !isKey {
				return out, keyRef{}, nil
			}
			if escaped {
				return out, keyRef{off: arenaStart, n: len(p.arena) - arenaStart, inArena: true}, nil
			}
			return out, keyRef{off: open + 1, n: i - open - 1}, nil
		}
		if c != '\\' {
			return nil, keyRef{}, p.fail(RuleSyntax, i, "unescaped control character U+00"+hex2(c)+" in string (write it as \\u00"+hex2(c)+")")
		}
		if isKey && !escaped {
			escaped = true
			p.arena = append(p.arena, src[open+1:i]...)
		}
		r, next, err := p.unescape(i)
		if err != nil {
			return nil, keyRef{}, err
		}
		out = appendCanonRune(out, r)
		if isKey {
			p.arena = utf8.AppendRune(p.arena, r)
		}
		if len(out) > p.maxBytes {
			p.pos = i
			return nil, keyRef{}, p.tooLarge()
		}
		i = next
		chunk = i
	}
}

// unescape decodes the escape sequence at src[i] == '\\' and returns the
// character and the offset after the sequence.
func (p *parser) unescape(i int) (rune, int, *Error) {
	src := p.src
	if i+1 >= len(src) {
		return 0, 0, p.fail(RuleSyntax, i, "unterminated escape sequence")
	}
	switch src[i+1] {
	case '"':
		return '"', i + 2, nil
	case '\\':
		return '\\', i + 2, nil
	case '/':
		return '/', i + 2, nil
	case 'b':
		return '\b', i + 2, nil
	case 'f':
		return '\f', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 't':
		return '\t', i + 2, nil
	case 'u':
	default:
		return 0, 0, p.fail(RuleSyntax, i, "invalid escape sequence in string")
	}
	r, ok := hex4(src, i+2)
	if !ok {
		return 0, 0, p.fail(RuleSyntax, i, "invalid \\u escape: expected four hex digits")
	}
	switch {
	case r == 0:
		return 0, 0, p.fail(RuleNullChar, i, "string contains \\u0000")
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, 0, p.fail(RuleLoneSurrogate, i, "low surrogate \\u"+strconv.FormatInt(int64(r), 16)+" without a preceding high surrogate")
	case r >= 0xD800 && r <= 0xDBFF:
		if i+7 < len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
			if lo, ok := hex4(src, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return ((r-0xD800)<<10 | (lo - 0xDC00)) + 0x10000, i + 12, nil
			}
		}
		return 0, 0, p.fail(RuleLoneSurrogate, i, "high surrogate \\u"+strconv.FormatInt(int64(r), 16)+" not followed by a \\uDC00-\\uDFFF low surrogate")
	}
	return r, i + 6, nil
}

func hex4(src []byte, i int) (rune, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var r rune
	for _, c := range src[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendCanonRune appends r as RFC 8785 writes it inside a string.
func appendCanonRune(out []byte, r rune) []byte {
	switch r {
	case '"':
		return append(out, '\\', '"')
	case '\\':
		return append(out, '\\', '\\')
	case '\b':
		return append(out, '\\', 'b')
	case '\t':
		return append(out, '\\', 't')
	case '\n':
		return append(out, '\\', 'n')
	case '\f':
		return append(out, '\\', 'f')
	case '\r':
		return append(out, '\\', 'r')
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&15])
	}
	return utf8.AppendRune(out, r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseNumber parses the number at p.pos, checks it against PostgreSQL's
// numeric range and writes it in ES6 Number.prototype.toString layout using
// its exact decimal digits.
func (p *parser) parseNumber(out []byte) ([]byte, *Error) {
	src := p.src
	start := p.pos
	i := start
	neg := src[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i >= len(src) || !isDigit(src[i]):
		p.pos = i
		return nil, p.syntaxAt("a digit")
	case src[i] == '0':
		i++
		if i < len(src) && isDigit(src[i]) {
			return nil, p.fail(RuleSyntax, intStart, "leading zeros are not allowed in numbers")
		}
	default:
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	intLen := i - intStart
	fracStart, fracLen := i, 0
	if i < len(src) && src[i] == '.' {
		i++
		fracStart = i
		for i < len(src) && isDigit(src[i]) {
			i++
		}
		fracLen = i - fracStart
		if fracLen == 0 {
			p.pos = i
			return nil, p.syntaxAt("a digit after the decimal point")
		}
	}
	var exp int64
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		eneg := false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			eneg = src[i] == '-'
			i++
		}
		ds := i
		for i < len(src) && isDigit(src[i]) {
			if exp < 1<<40 { // saturate; anything this large is out of range
				exp = exp*10 + int64(src[i]-'0')
			}
			i++
		}
		if i == ds {
			p.pos = i
			return nil, p.syntaxAt("a digit in the exponent")
		}
		if eneg {
			exp = -exp
		}
	}
	p.pos = i

	// The mantissa digits form the virtual string D = int digits ++ fraction
	// digits; index j < intLen is src[intStart+j], otherwise
	// src[fracStart+j-intLen].
	total := intLen + fracLen
	first := -1
	for j := 0; j < total; j++ {
		if p.digit(j, intStart, intLen, fracStart) != '0' {
			first = j
			break
		}
	}
	if exp >= pgExpLimit || exp <= -pgExpLimit {
		return nil, p.fail(RuleNumberRange, start, "exponent "+strconv.FormatInt(exp, 10)+" is too large for PostgreSQL numeric")
	}
	if int64(fracLen)-exp > pgMaxScale {
		return nil, p.fail(RuleNumberRange, start, "number has more than "+strconv.Itoa(pgMaxScale)+" digits after the decimal point")
	}
	if first < 0 {
		return append(out, '0'), nil
	}
	last := total - 1
	for p.digit(last, intStart, intLen, fracStart) == '0' {
		last--
	}
	k := int64(last - first + 1)
	// value = 0.s * 10^n with s = D[first..last]
	n := int64(intLen-first) + exp
	if n-1 > pgMaxLeadPower {
		return nil, p.fail(RuleNumberRange, start, "number has more than "+strconv.Itoa(pgMaxLeadPower+1)+" digits before the decimal point")
	}
	// Plain decimal has max(n, 1) integer digits and max(k-n, 0) fraction
	// digits; the canonical form below is never longer.
	plain := max(n, 1) + max(k-n, 0)
	if k > n {
		plain++ // the decimal point
	}
	if neg {
		plain++
	}
	canonStart := len(out)
	if neg {
		out = append(out, '-')
	}
	d := digitSource{src: src, intStart: intStart, intLen: intLen, fracStart: fracStart}
	switch {
	case k <= n && n <= 21:
		out = d.appendRange(out, first, last+1)
		out = append(out, "000000000000000000000"[:n-k]...)
	case 0 < n && n <= 21:
		out = d.appendRange(out, first, first+int(n))
		out = append(out, '.')
		out = d.appendRange(out, first+int(n), last+1)
	case -6 < n && n <= 0:
		out = append(out, "0.000000"[:2-n]...)
		out = d.appendRange(out, first, last+1)
	default:
		out = d.appendRange(out, first, first+1)
		if k > 1 {
			out = append(out, '.')
			out = d.appendRange(out, first+1, last+1)
		}
		if n-1 >= 0 {
			out = append(out, 'e', '+')
		} else {
			out = append(out, 'e', '-')
		}
		e := n - 1
		if e < 0 {
			e = -e
		}
		out = strconv.AppendInt(out, e, 10)
	}
	p.expansion += max(0, plain-int64(len(out)-canonStart))
	return out, nil
}

func (p *parser) digit(j, intStart, intLen, fracStart int) byte {
	if j < intLen {
		return p.src[intStart+j]
	}
	return p.src[fracStart+j-intLen]
}

type digitSource struct {
	src                         []byte
	intStart, intLen, fracStart int
}

// appendRange appends digits D[from:to].
func (d digitSource) appendRange(out []byte, from, to int) []byte {
	if from < d.intLen {
		out = append(out, d.src[d.intStart+from:d.intStart+min(to, d.intLen)]...)
		from = d.intLen
	}
	if from < to {
		out = append(out, d.src[d.fracStart+from-d.intLen:d.fracStart+to-d.intLen]...)
	}
	return out
}
