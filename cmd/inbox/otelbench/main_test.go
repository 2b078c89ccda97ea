package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/pginbox/pginbox/cmd/inbox/internal/bench"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// A smoke run at toy sizes: the default scenarios each report the otelinbox
// side next to plain pginbox, and every correctness check passes with the
// integration installed. (Speed is for the integrator's full run.)
func TestSmokeRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{
		"-database-url", inboxtest.Database(t), "-quiet", "-json",
		"-rounds", "1", "-calls", "100", "-retained", "200",
		"-drain-messages", "100", "-drain-concurrency", "4",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r bench.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Scenario)
		if !r.OK || r.Hooked == nil || r.Hooked.Calls != r.Calls || r.HookedRatio <= 0 {
			t.Errorf("%s: ok %v, hooked %+v, ratio %v", r.Scenario, r.OK, r.Hooked, r.HookedRatio)
		}
		t.Logf("%s: pginbox %.0f/s, with otelinbox %.0f/s (ratio %.2f, goal 0.95)", r.Scenario, r.CallsPerSec, r.Hooked.CallsPerSec, r.HookedRatio)
	}
	if len(got) != 3 {
		t.Errorf("scenarios %v, want accept-fresh, accept-dup90, drain-c4", got)
	}
}
