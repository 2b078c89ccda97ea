package settle

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
)

func TestReasonAndReceipt(t *testing.T) {
	t.Parallel()
	id, err := inboxtype.Parse("01M8Q0YKR6D4H321J7ZKCGX37F")
	if err != nil {
		t.Fatal(err)
	}
	conflict := fmt.Errorf("wrapped: %w", &inbox.ConflictError{ReceiptID: id})
	invalid := &inbox.ValidationError{Field: "payload", Rule: inbox.RuleInvalidJSON}
	if Reason(conflict) != ReasonConflict || Receipt(conflict) != id.String() {
		t.Errorf("conflict: %q %q", Reason(conflict), Receipt(conflict))
	}
	if Reason(invalid) != ReasonInvalid || Receipt(invalid) != "" {
		t.Errorf("invalid: %q %q", Reason(invalid), Receipt(invalid))
	}
}

func TestLastErrors(t *testing.T) {
	t.Parallel()
	var l LastErrors[string]
	l.Remember("a", errors.New("first"))
	l.Remember("a", errors.New("second"))
	if got := l.Recall("a"); got != "second" {
		t.Errorf("Recall = %q, want the latest error", got)
	}
	if got := l.Recall("a"); got == "second" {
		t.Error("Recall did not forget")
	}
	l.Remember("b", errors.New("x"))
	l.Forget("b")
	if got := l.Recall("b"); got == "x" {
		t.Error("Forget did not forget")
	}
	for i := range maxRemembered + 10 {
		l.Remember(fmt.Sprint(i), errors.New("e"))
	}
	if len(l.m) != maxRemembered {
		t.Errorf("%d remembered, want the bound %d", len(l.m), maxRemembered)
	}
}
