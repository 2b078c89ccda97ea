package bench

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// The citus scenario's per-message model: what a message costs each node of
// each side, beside one node's, and the figure that target 15 of
// docs/TARGETS.md judges, CPU per accepted and completed message.

// nodeShare is one node's cost per message.
type nodeShare struct {
	name                string
	cpuUs, stmts, plans float64 // CPU net of idle; top-level statements and their plans
}

// sideCost is a side's cost per message over a phase, or over phases
// added up (plus).
type sideCost struct {
	side  string
	nodes []nodeShare
	trips float64 // round trips from the client
}

func (c sideCost) sum(f func(nodeShare) float64) float64 {
	t := 0.0
	for _, n := range c.nodes {
		t += f(n)
	}
	return t
}

func (c sideCost) cpuUs() float64 { return c.sum(func(n nodeShare) float64 { return n.cpuUs }) }
func (c sideCost) stmts() float64 { return c.sum(func(n nodeShare) float64 { return n.stmts }) }
func (c sideCost) plans() float64 { return c.sum(func(n nodeShare) float64 { return n.plans }) }

// coordinatorShare is the coordinator's part of the side's CPU; false for
// a side without a coordinator or without CPU to share.
func (c sideCost) coordinatorShare() (float64, bool) {
	total := c.cpuUs()
	for _, n := range c.nodes {
		if n.name == "coordinator" && total > 0 {
			return n.cpuUs / total, true
		}
	}
	return 0, false
}

// plus is the cost of a message that went through c's phase and o's.
func (c sideCost) plus(o sideCost) sideCost {
	out := sideCost{side: c.side, trips: c.trips + o.trips}
	for _, n := range c.nodes {
		for _, m := range o.nodes {
			if m.name == n.name {
				n.cpuUs, n.stmts, n.plans = n.cpuUs+m.cpuUs, n.stmts+m.stmts, n.plans+m.plans
			}
		}
		out.nodes = append(out.nodes, n)
	}
	return out
}

// ratioToOne is c's CPU per message over the first side's (one node); false
// when that one is not positive.
func ratioToOne(costs []sideCost, c sideCost) (float64, bool) {
	one := costs[0].cpuUs()
	if one <= 0 {
		return 0, false
	}
	return c.cpuUs() / one, true
}

// setCostExtras adds the sides' per-message figures to r.Extra: per node
// <side>_<node>_cpu_us_per_msg (net of idle), _stmts_per_msg and
// _plans_per_msg; per side the same summed over its nodes
// (<side>_all_...), <side>_round_trips_per_msg, and for the sides after the
// first (one node) <side>_cpu_ratio_to_single and, on Citus,
// <side>_coordinator_cpu_share.
func setCostExtras(r *Result, costs []sideCost) {
	for i, c := range costs {
		for _, n := range c.nodes {
			key := c.side + "_" + n.name
			r.setExtra(key+"_cpu_us_per_msg", math.Round(n.cpuUs))
			r.setExtra(key+"_stmts_per_msg", round3(n.stmts))
			r.setExtra(key+"_plans_per_msg", round3(n.plans))
		}
		r.setExtra(c.side+"_all_cpu_us_per_msg", math.Round(c.cpuUs()))
		r.setExtra(c.side+"_all_stmts_per_msg", round3(c.stmts()))
		r.setExtra(c.side+"_all_plans_per_msg", round3(c.plans()))
		r.setExtra(c.side+"_round_trips_per_msg", round3(c.trips))
		if i == 0 {
			continue
		}
		if ratio, ok := ratioToOne(costs, c); ok {
			r.setExtra(c.side+"_cpu_ratio_to_single", round2(ratio))
		}
		if share, ok := c.coordinatorShare(); ok {
			r.setExtra(c.side+"_coordinator_cpu_share", round3(share))
		}
	}
}

// costNotes lays the sides' per-message figures out as a table, one row a
// side, a CPU column a node.
func costNotes(title string, costs []sideCost) []string {
	var names []string
	for _, c := range costs {
		for _, n := range c.nodes {
			if !slices.Contains(names, n.name) {
				names = append(names, n.name)
			}
		}
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "side\t%s\ttotal\tx one node\tcoordinator share\tstatements\tplans\tround trips\t\n", strings.Join(names, "\t"))
	for _, c := range costs {
		row := []string{c.side}
		for _, name := range names {
			cell := "-"
			for _, n := range c.nodes {
				if n.name == name {
					cell = fmt.Sprintf("%.0f", n.cpuUs)
				}
			}
			row = append(row, cell)
		}
		row = append(row, fmt.Sprintf("%.0f", c.cpuUs()))
		if ratio, ok := ratioToOne(costs, c); ok {
			row = append(row, fmt.Sprintf("%.2f", ratio))
		} else {
			row = append(row, "-")
		}
		if share, ok := c.coordinatorShare(); ok {
			row = append(row, fmt.Sprintf("%.1f%%", 100*share))
		} else {
			row = append(row, "-")
		}
		row = append(row, fmt.Sprintf("%.3f", c.stmts()), fmt.Sprintf("%.3f", c.plans()), fmt.Sprintf("%.3f", c.trips))
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	return append([]string{title}, strings.Split(strings.TrimRight(b.String(), "\n"), "\n")...)
}

// Target 15 of docs/TARGETS.md, for a message accepted (AcceptBatch of one
// scope) and completed (a batched drain, no-op handler).
const (
	citusCPUTarget   = 2.0  // x one node's CPU per message, on every Citus side
	citusCoordTarget = 0.05 // of the cluster's CPU on the coordinator, with sessions on the nodes
)

// citusModel is the figure per accepted and completed message: the cost per
// message of the accept-batch phase plus that of the no-op drain at
// concurrency c, per side and node.
// acceptRaw and drainRaw are the phases' raw loops, CPU per row: the same
// sum for them is the floor Citus sets here for any client.
func (s *suite) citusModel(c int, accept, drain *Result, acceptCosts, drainCosts, acceptRaw, drainRaw []sideCost, desc string) *Result {
	r := &Result{Scenario: fmt.Sprintf("citus-accepted-completed-c%d", c), Concurrency: c, Rounds: s.o.Rounds, OK: true,
		Calls:       s.o.DrainMessages * s.o.Rounds,
		Description: desc,
		Target: fmt.Sprintf("CPU per accepted and completed message on Citus <= %.0f x one node's, coordinator's share with sessions on the worker nodes <= %.0f%% (docs/TARGETS.md, target 15)",
			citusCPUTarget, 100*citusCoordTarget),
	}
	r.Raw.Description = "no raw side: the figures are CPU per message of the phases " + accept.Scenario + " and " + drain.Scenario + ", whose raw loops are reported there"
	for _, p := range []*Result{accept, drain} {
		if !p.OK {
			r.failf("%s failed: %s", p.Scenario, strings.Join(p.Failures, "; "))
		}
	}
	if len(acceptCosts) != len(drainCosts) || len(acceptCosts) == 0 {
		r.failf("no cost account for %s and %s", accept.Scenario, drain.Scenario)
		return r
	}
	costs := make([]sideCost, len(acceptCosts))
	for i := range costs {
		costs[i] = acceptCosts[i].plus(drainCosts[i])
	}
	setCostExtras(r, costs)
	r.Notes = costNotes(fmt.Sprintf("CPU us per accepted and completed message (%s + %s) by node, net of idle:", accept.Scenario, drain.Scenario), costs)
	meets := true
	for _, c := range costs[1:] {
		ratio, ok := ratioToOne(costs, c)
		line := fmt.Sprintf("%s: %.2f x one node's CPU (target <= %.0f x: %s)", c.side, ratio, citusCPUTarget, metOrNot(ok && ratio <= citusCPUTarget))
		meets = meets && ok && ratio <= citusCPUTarget
		if c.side == "nodes" {
			r.Ratio = ratio
		}
		if share, ok := c.coordinatorShare(); ok {
			line += fmt.Sprintf(", coordinator %.1f%% of the cluster's CPU", 100*share)
			if c.side == "nodes" {
				line += fmt.Sprintf(" (target <= %.0f%%: %s)", 100*citusCoordTarget, metOrNot(share <= citusCoordTarget))
				meets = meets && share <= citusCoordTarget
			}
		}
		r.Notes = append(r.Notes, line)
	}
	if len(acceptRaw) == len(costs) && len(drainRaw) == len(costs) {
		raws := make([]sideCost, len(costs))
		for i := range raws {
			raws[i] = acceptRaw[i].plus(drainRaw[i])
		}
		r.Notes = append(r.Notes, rawCostNote(fmt.Sprintf("raw loops of %s + %s, CPU us per row written, net of idle:", accept.Scenario, drain.Scenario), raws, r))
		for i, c := range costs[1:] {
			ratio, ok := ratioToOne(costs, c)
			rawRatio, rawOK := ratioToOne(raws, raws[i+1])
			if ok && rawOK && rawRatio > 0 {
				r.setExtra(c.side+"_cpu_ratio_over_raw", round2(ratio/rawRatio))
				r.Notes = append(r.Notes, fmt.Sprintf("%s: pginbox's %.2f x one node over the raw loops' %.2f x: %.2f", c.side, ratio, rawRatio, ratio/rawRatio))
			}
		}
	}
	r.MeetsTarget = meets
	r.Verified = fmt.Sprintf("the counts of %s and %s (checked there)", accept.Scenario, drain.Scenario)
	return r
}

// rawCostNote is one line of the raw loops' CPU per row by side, each
// beside one node's; it adds them to r.Extra as raw_<side>_cpu_us_per_row
// and raw_<side>_cpu_ratio_to_single.
func rawCostNote(title string, raws []sideCost, r *Result) string {
	var parts []string
	for i, c := range raws {
		if len(c.nodes) == 0 {
			continue
		}
		r.setExtra("raw_"+c.side+"_cpu_us_per_row", math.Round(c.cpuUs()))
		part := fmt.Sprintf("%s %.0f", c.side, c.cpuUs())
		if ratio, ok := ratioToOne(raws, c); ok && i > 0 {
			r.setExtra("raw_"+c.side+"_cpu_ratio_to_single", round2(ratio))
			part += fmt.Sprintf(" (%.2f x)", ratio)
		}
		parts = append(parts, part)
	}
	return title + " " + strings.Join(parts, ", ")
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
