package modeltest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadTrace(t *testing.T) {
	const itf = `{"vars":["st","last"],"states":[{"last":{"act":"claim","arg":{"#bigint":"0"},"created":{"#bigint":"0"},"flag":false,"id":{"#bigint":"2"},"msg":"","outcome":"ok","scope":"","token":{"#bigint":"7"},"worker":"w1"},
"st":{"receipts":{"#map":[[{"#bigint":"2"},{"attempts":{"#bigint":"0"},"msg":"m1","payload":true,"replayOf":{"#bigint":"0"},"scope":"s1","status":"PENDING","version":{"#bigint":"1"},"key":"k","seq":{"#bigint":"3"}}]]},
"work":{"#map":[[{"#bigint":"2"},{"attempts":{"#bigint":"1"},"due":true,"expired":false,"scope":"s1","status":"PROCESSING","token":{"#bigint":"7"},"version":{"#bigint":"2"},"key":"k","seq":{"#bigint":"3"}}]]},
"claims":{"#map":[["w1",{"#set":[{"id":{"#bigint":"2"},"token":{"#bigint":"7"}}]}]]},"lockedBy":{"#map":[[{"#bigint":"2"},""]]}}}]}`
	path := filepath.Join(t.TempDir(), "t.itf.json")
	if err := os.WriteFile(path, []byte(itf), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	s := tr.States[0]
	if s.Last.Act != "claim" || s.Last.Token != 7 || s.Last.Worker != "w1" {
		t.Errorf("last = %+v", s.Last)
	}
	if w := s.Work["2"]; w.Status != "PROCESSING" || w.Token != 7 || w.Version != 2 || w.Key != "k" || w.Seq != 3 {
		t.Errorf("work[2] = %+v", w)
	}
	if r := s.Receipts["2"]; r.Scope != "s1" || !r.Payload || r.Key != "k" || r.Seq != 3 {
		t.Errorf("receipts[2] = %+v", r)
	}
	if c := s.Claims["w1"]; len(c) != 1 || c[0] != (Claim{ID: 2, Token: 7}) {
		t.Errorf("claims[w1] = %+v", c)
	}
}
