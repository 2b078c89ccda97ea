package inbox_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// Canonical JSON sorts keys and writes numbers one way, keeping every digit;
// a payload Accept would refuse is refused here with the same error.
func ExampleCanonicalize() {
	for _, payload := range []any{
		json.RawMessage(`{ "total": 59.90, "orderId": "o-1001", "qty": 2E0 }`),
		json.RawMessage(`{"id": 9007199254740993, "ratio": 0.1000000000000000055511151231257827}`),
		map[string]any{"orderId": "o-1001", "tags": []string{"b", "a"}}, // a Go value: encoded with encoding/json first
		json.RawMessage(`{"orderId": "o-1", "orderId": "o-2"}`),
	} {
		canon, err := inbox.Canonicalize(payload)
		var verr *inbox.ValidationError
		if errors.As(err, &verr) {
			fmt.Println("rejected:", verr.Rule)
			continue
		}
		fmt.Println(string(canon))
	}
	// Output:
	// {"orderId":"o-1001","qty":2,"total":59.9}
	// {"id":9007199254740993,"ratio":0.1000000000000000055511151231257827}
	// {"orderId":"o-1001","tags":["b","a"]}
	// rejected: duplicate_key
}

// A producer computes the fingerprint Accept will compute: redeliveries that
// differ only in layout share it, a changed payload does not.
func ExampleFingerprint() {
	fingerprint := func(payload string) string {
		canon, err := inbox.Canonicalize(json.RawMessage(payload))
		if err != nil {
			panic(err)
		}
		fp := inbox.Fingerprint("order.created", 1, canon)
		return fmt.Sprintf("%x", fp)
	}
	first := fingerprint(`{"orderId":"o-1001","totalCents":5990}`)
	fmt.Println(first)
	fmt.Println(fingerprint(`{ "totalCents": 5990.0, "orderId": "o-1001" }`) == first)
	fmt.Println(fingerprint(`{"orderId":"o-1001","totalCents":5999}`) == first)
	// Output:
	// d273401e0749409b2d151f620eba321e530e0afd9dd322ba926a69bad074f72b
	// true
	// false
}
