package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes one JSON object per scenario, one per line.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // targets read ">= 0.90", not "\u003e= 0.90"
	for _, r := range rep.Results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes the human report: environment, one row per scenario, then
// what the database confirmed.
func WriteTable(w io.Writer, rep *Report) error {
	e := rep.Environment
	fmt.Fprintf(w, "pginbox bench — PostgreSQL %s (fsync=%s, synchronous_commit=%s, full_page_writes=%s, wal_sync_method=%s, shared_buffers=%s)\n",
		e.PostgresVersion, e.Fsync, e.SynchronousCommit, e.FullPageWrites, e.WalSyncMethod, e.SharedBuffers)
	fmt.Fprintf(w, "%d cores (%s), %s %s, pginbox %s, %s\n\n", e.Cores, e.CPU, e.GoVersion, e.OS, e.PginboxCommit, e.Database)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconc\tcalls\tpginbox/s\tp50 ms\tp95 ms\tp99 ms\traw/s\traw p95 ms\tratio\ttarget met\tchecks\t")
	for _, r := range rep.Results {
		ratio, met := fmt.Sprintf("%.2f", r.Ratio), yesNo(r.MeetsTarget)
		if r.Ratio == 0 && r.Raw.CallsPerSec == 0 {
			ratio, met = "-", "-" // jobs: compared with River outside the run
		}
		rawRate := "-" // fairness: the raw side is latencies alone
		if r.Raw.CallsPerSec > 0 {
			rawRate = rate(r.Raw.CallsPerSec)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Scenario, r.Concurrency, thousands(r.Calls), rate(r.CallsPerSec),
			latency(r.P50Ms), latency(r.P95Ms), latency(r.P99Ms),
			rawRate, latency(r.Raw.P95Ms), ratio, met, passFail(r.OK))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%s: %s\n", r.Scenario, r.Description)
		fmt.Fprintf(w, "  target: %s\n", r.Target)
		fmt.Fprintf(w, "  raw: %s\n", r.Raw.Description)
		if r.RawNotify != nil {
			fmt.Fprintf(w, "  raw with pg_notify in every statement: %s/s, p95 %s ms (pginbox = %.2f x this)\n",
				rate(r.RawNotify.CallsPerSec), latency(r.RawNotify.P95Ms), ratioOf(r.CallsPerSec, r.RawNotify.CallsPerSec))
		}
		if r.Hooked != nil {
			fmt.Fprintf(w, "  %s: %s/s, p95 %s ms = %.2f x pginbox (goal %s: %s)\n",
				r.Hooked.Description, rate(r.Hooked.CallsPerSec), latency(r.Hooked.P95Ms), r.HookedRatio, r.HookedTarget, metOrNot(r.HookedMeetsTarget))
		}
		if r.RLS != nil {
			fmt.Fprintf(w, "  %s: %s/s, p95 %s ms = %.2f x pginbox (goal %s: %s)\n",
				r.RLS.Description, rate(r.RLS.CallsPerSec), latency(r.RLS.P95Ms), r.RLSRatio, r.RLSTarget, metOrNot(r.RLSMeetsTarget))
		}
		for _, line := range r.Notes {
			fmt.Fprintf(w, "  %s\n", line)
		}
		if len(r.Extra) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
				parts = append(parts, fmt.Sprintf("%s=%s", k, trimFloat(r.Extra[k])))
			}
			fmt.Fprintf(w, "  %s\n", strings.Join(parts, " "))
		}
		fmt.Fprintf(w, "  verified: %s\n", r.Verified)
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  FAILED: %s\n", f)
		}
	}
	return nil
}

func rate(f float64) string { return thousands(int(math.Round(f))) }

func latency(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", f)
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func metOrNot(b bool) string {
	if b {
		return "met"
	}
	return "NOT met"
}

func passFail(b bool) string {
	if b {
		return "pass"
	}
	return "FAIL"
}

func trimFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return thousands(int(f))
	}
	return fmt.Sprintf("%.2f", f)
}
