package inboxtest

import (
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

// PollInterval is how often WaitForStatus reads the receipt.
const PollInterval = 10 * time.Millisecond

// WaitForStatus polls receipt id until its status is want and returns what it
// saw. It fails the test when timeout passes first (a timeout of 0 checks
// once), when the receipt does not exist, or when the receipt settles in
// another final status (COMPLETED or DEAD), which no worker would change.
func WaitForStatus(t testing.TB, q Querier, id inbox.ID, want inbox.Status, timeout time.Duration) Receipt {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, ok, err := readByID(t.Context(), q, id)
		switch {
		case err != nil:
			t.Fatalf("inboxtest.WaitForStatus: receipt %s: %v", id, err)
		case !ok:
			t.Fatalf("inboxtest.WaitForStatus: no receipt %s", id)
		case r.Status == want:
			return r
		case r.Status == inbox.StatusCompleted || r.Status == inbox.StatusDead:
			t.Fatalf("inboxtest.WaitForStatus: want %s, found a final status: %s", want, r)
		case !time.Now().Before(deadline):
			t.Fatalf("inboxtest.WaitForStatus: want %s within %v, found %s", want, timeout, r)
		}
		time.Sleep(PollInterval)
	}
}
