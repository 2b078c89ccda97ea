package inboxtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

// RequireReceipt fails the test unless a receipt exists for identity, and
// returns it. A replay shares its original's identity; the receipt returned
// is the original, the one the delivery created. When there is none, the
// failure lists receipts of the same message ID under another scope, source
// or consumer, the usual mistake.
func RequireReceipt(t testing.TB, q Querier, identity inbox.Identity) Receipt {
	t.Helper()
	return requireReceipt(t, "RequireReceipt", q, identity)
}

// RequireStatus fails the test unless identity's receipt exists and has status
// want, and returns it. The failure shows the status found, the attempts and
// the last error. It checks once; [WaitForStatus] waits for a running worker.
func RequireStatus(t testing.TB, q Querier, identity inbox.Identity, want inbox.Status) Receipt {
	t.Helper()
	r := requireReceipt(t, "RequireStatus", q, identity)
	if r.Status != want {
		t.Fatalf("inboxtest.RequireStatus: want %s, found %s", want, r)
	}
	return r
}

// RequireNoReceipt fails the test if a receipt exists for identity, showing
// the receipt it found.
func RequireNoReceipt(t testing.TB, q Querier, identity inbox.Identity) {
	t.Helper()
	r, ok, err := readByIdentity(t.Context(), q, identity)
	if err != nil {
		t.Fatalf("inboxtest.RequireNoReceipt: %s: %v", identity, err)
	}
	if ok {
		t.Fatalf("inboxtest.RequireNoReceipt: want none, found %s", r)
	}
}

// maxNearby bounds the receipts a "no receipt" failure lists.
const maxNearby = 5

func requireReceipt(t testing.TB, assertion string, q Querier, identity inbox.Identity) Receipt {
	t.Helper()
	r, ok, err := readByIdentity(t.Context(), q, identity)
	if err != nil {
		t.Fatalf("inboxtest.%s: %s: %v", assertion, identity, err)
	}
	if ok {
		return r
	}
	nearby, err := readByMessageID(t.Context(), q, identity.MessageID, maxNearby+1)
	if err != nil {
		t.Fatalf("inboxtest.%s: no receipt for %s (listing others with its message ID: %v)", assertion, identity, err)
	}
	t.Fatalf("inboxtest.%s: no receipt for %s; %s", assertion, identity, describeNearby(identity.MessageID, nearby))
	return Receipt{}
}

func describeNearby(messageID string, rs []Receipt) string {
	if len(rs) == 0 {
		return fmt.Sprintf("no receipt has message ID %q", messageID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "receipts with message ID %q:", messageID)
	for i, r := range rs {
		if i == maxNearby {
			b.WriteString("\n\t...")
			break
		}
		b.WriteString("\n\t" + r.String())
	}
	return b.String()
}
