package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

// What a producer computes with Canonicalize and Fingerprint is the fingerprint
// Accept stores, for raw JSON and for Go values.
func TestCanonicalizeMatchesAccept(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	client := newClient(t, pool, inbox.Config{})
	admin := admNew(t, pool).Operator()

	payloads := []any{
		json.RawMessage(`{"b":[1,2.50,1e3],"a":"x","c":{"\u20ac":1,"\r":2}}`),
		json.RawMessage(`9007199254740993`),
		json.RawMessage(`0.1000000000000000055511151231257827`),
		[]byte(`{"id":123456789012345678901234567890}`),
		map[string]any{"orderId": "o-1001", "totalCents": 5990, "tags": []string{"b", "a"}},
		struct {
			OrderID string  `json:"orderId"`
			Total   float64 `json:"total"`
		}{"o-1", 0.1},
	}
	for i, p := range payloads {
		msg := orderMsg(fmt.Sprint("canon-", i), p)
		res, err := client.Accept(ctx, msg)
		is.NoErr(err)
		got, err := admin.Get(ctx, res.ID)
		is.NoErr(err)

		canon, err := inbox.Canonicalize(p)
		is.NoErr(err)
		fp := inbox.Fingerprint(msg.EventType, msg.SchemaVersion, canon)
		is.Equal(got.Fingerprint, fp[:]) // the producer's fingerprint is the stored one
	}
}

// Canonicalize refuses what Accept with a default Config refuses, with the same
// *ValidationError.
func TestCanonicalizeRejectsLikeAccept(t *testing.T) {
	t.Parallel()
	deep := func(n int) json.RawMessage { return json.RawMessage(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	str := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) } // n bytes of JSON
	cases := []struct {
		payload any
		rule    inbox.Rule
	}{
		{json.RawMessage(`{"a":1,"a":2}`), inbox.RuleDuplicateKey},
		{json.RawMessage(`{"a":`), inbox.RuleInvalidJSON},
		{json.RawMessage(`"\ud800"`), inbox.RuleLoneSurrogate},
		{json.RawMessage(`"\u0000"`), inbox.RuleNullCharacter},
		{json.RawMessage(`1e131072`), inbox.RuleNumberRange},
		{deep(inbox.DefaultMaxPayloadDepth + 1), inbox.RuleTooDeep},
		{str(inbox.DefaultMaxPayloadBytes + 1), inbox.RuleTooLarge},
		{math.NaN(), inbox.RuleNonFinite},
		{make(chan int), inbox.RuleUnsupportedType},
		{"\xff", inbox.RuleInvalidUTF8},
	}
	for _, tc := range cases {
		_, err := inbox.Canonicalize(tc.payload)
		var verr *inbox.ValidationError
		if !errors.As(err, &verr) || verr.Rule != tc.rule || verr.Field != "payload" || !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("Canonicalize(%.40v): got %v, want a payload *ValidationError with rule %s", tc.payload, err, tc.rule)
		}
	}
	// The limits are inclusive.
	for _, p := range []json.RawMessage{deep(inbox.DefaultMaxPayloadDepth), str(inbox.DefaultMaxPayloadBytes)} {
		if _, err := inbox.Canonicalize(p); err != nil {
			t.Errorf("Canonicalize at the limit: %v", err)
		}
	}
}
