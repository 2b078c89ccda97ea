package inbox

import "testing"

// A stale lease of a receipt this worker claimed again must not take the new
// lease out of the heartbeat when it finishes.
func TestDroppingAStaleLeaseKeepsItsSuccessor(t *testing.T) {
	s := newLeaseSet()
	id := ID{1}
	first := s.add([]claimed{{ID: id, Token: ID{2}}})[0]
	second := s.add([]claimed{{ID: id, Token: ID{3}}})[0]
	s.drop(first)
	if held := s.snapshot(); len(held) != 1 || held[0] != second {
		t.Fatalf("after dropping the stale lease the set holds %v, want the new lease", held)
	}
	if first.ctx.Err() == nil {
		t.Fatal("a dropped lease's context must end")
	}
	s.drop(second)
	if s.count() != 0 {
		t.Fatal("the set should be empty")
	}
}
