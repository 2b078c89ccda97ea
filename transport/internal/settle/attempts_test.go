package settle

import "testing"

func TestAttempts(t *testing.T) {
	t.Parallel()
	var a Attempts[string]
	if a.Failed("a") {
		t.Error("Failed before any failure")
	}
	if n := a.Fail("a"); n != 1 {
		t.Errorf("first Fail = %d, want 1", n)
	}
	if n := a.Fail("a"); n != 2 || !a.Failed("a") {
		t.Errorf("second Fail = %d, want 2 and Failed", n)
	}
	a.Forget("a")
	if a.Failed("a") || a.Fail("a") != 1 {
		t.Error("Forget did not start the count again")
	}
}

// Full, the counts start again (as after a restart) rather than grow.
func TestAttemptsBounded(t *testing.T) {
	t.Parallel()
	var a Attempts[int]
	for i := range maxCounted {
		a.Fail(i)
	}
	if n := a.Fail(0); n != 2 {
		t.Errorf("a counted key while full: Fail = %d, want 2", n)
	}
	a.Fail(maxCounted) // a new key while full
	if a.Failed(1) || len(a.m) != 1 {
		t.Errorf("%d counts kept after a new key while full, want 1", len(a.m))
	}
}
