package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// guardMargin is how far above its floor an idle agent may be before the
// guard fails. The report's targets are 1.2–1.3×, but the agent measured
// 1.6–1.8× (leader), 2.0–2.2× (followers) and 1.8× (observers) when the
// guard was written (docs/benchmarks, "Idle cost against its floor"), and
// the ratio of a 10 s window moves by up to 0.5: a guard at 2× would fail
// on noise. It catches gross regressions only, half as much again as
// today; lower it when the agent comes down towards its targets.
const guardMargin = 3.0

// plantEnv is the environment variable that plants a cost in the guard's
// agents, for seeing that the guard can fail: its value is split at
// spaces, words that start with "-" are added to the agents' flags and
// NAME=VALUE words to their environment. With
//
//	CONCLAVE_BENCH_PLANT=-detector.heartbeat_interval=10ms
//
// the voters send and answer five heartbeats for each of the floor's, as
// an agent that did five times the work per heartbeat would, and
// TestIdleCostGuard fails.
const plantEnv = "CONCLAVE_BENCH_PLANT"

// TestIdleCostGuard is CI's regression guard on idle cost: 5 majority
// voters at the defaults and 2 observers against wakefloor's bare
// heartbeat pattern with a stock memberlist node per process, side by
// side in four 10 s windows. It fails when the median over windows of an
// agent role's CPU ÷ its floor's is above guardMargin. About 60 s.
func TestIdleCostGuard(t *testing.T) {
	o := testOptions(t)
	// Earlier tests' etcd clients may still be winding down: only what
	// this test starts must end with it.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	o.wakefloorBin = filepath.Join(o.work, "wakefloor")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := buildWakefloor(ctx, o.repo, o.wakefloorBin); err != nil {
		t.Fatal(err)
	}
	spec := floorSpec{Windows: 4, Window: 10 * time.Second, Settle: 5 * time.Second}
	for _, w := range strings.Fields(os.Getenv(plantEnv)) {
		if strings.HasPrefix(w, "-") {
			spec.AgentFlags = append(spec.AgentFlags, w)
		} else {
			spec.AgentEnv = append(spec.AgentEnv, w)
		}
	}
	if len(spec.AgentFlags)+len(spec.AgentEnv) > 0 {
		t.Logf("%s: a planted cost: the agents run with flags %v and environment %v", plantEnv, spec.AgentFlags, spec.AgentEnv)
	}
	res, err := measureFloor(ctx, o, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want majority leader, followers and observers", len(res.Rows))
	}
	for _, r := range res.Rows {
		for w := range r.AgentCPU {
			// Every process of both sides wakes many times a second.
			if !(r.AgentCPU[w] > 0) || !(r.FloorCPU[w] > 0) {
				t.Errorf("%s, window %d: agent %v, floor %v of a core: a live process uses some", r.Name, w, r.AgentCPU[w], r.FloorCPU[w])
			}
		}
		ratio := r.Ratio()
		t.Logf("%-35s agent %.2f %% floor %.2f %% ratio %.2f× per window %.2f (load %.1f → %.1f) %s",
			r.Name, 100*median(r.AgentCPU), 100*median(r.FloorCPU), ratio, r.ratios(), res.Load[0], res.Load[1], r.Note)
		if math.IsNaN(ratio) || ratio > guardMargin {
			t.Errorf("%s: idle CPU %.2f× its floor (median of %d windows: %.2f), over the %.1f× guard: an idle agent got grossly dearer; profile it with bench/profile-cluster.sh and compare with docs/benchmarks",
				r.Name, ratio, len(r.ratios()), r.ratios(), guardMargin)
		}
	}
}

func TestFloorRowRatioIsTheMedianOfWindows(t *testing.T) {
	r := floorRow{AgentCPU: []float64{0.02, 0.03, 0.09}, FloorCPU: []float64{0.01, 0.02, 0.01}, Target: 1.3}
	// Per window 2, 1.5 and 9: the median drops the spoiled third window.
	if got := r.Ratio(); got != 2 {
		t.Fatalf("ratio %v, want 2", got)
	}
	if r.Met() {
		t.Fatal("2× met a 1.3× target")
	}
	r.Target = 2
	if !r.Met() {
		t.Fatal("2× did not meet a 2× target")
	}
	r.Note = "the leader changed"
	if r.Met() {
		t.Fatal("a row with a leader change met its target")
	}
	if !math.IsNaN((floorRow{AgentCPU: []float64{1}, FloorCPU: []float64{0}}).Ratio()) {
		t.Fatal("a floor of zero gave a ratio")
	}
	// A row without a target is there to be read: never met, and the
	// report says so instead of printing a target of 0.
	free := floorRow{Name: "libp2p split", AgentCPU: []float64{0.01}, FloorCPU: []float64{0.02}}
	if free.Met() {
		t.Fatal("a row without a target met it")
	}
	var out strings.Builder
	writeFloor(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, &floorResult{Rows: []floorRow{free}}, runInfo{})
	if !strings.Contains(out.String(), "| 0.50× | 0.50 | — | — |") {
		t.Fatalf("report of a row without a target:\n%s", out.String())
	}
}
