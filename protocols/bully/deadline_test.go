package bully

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
)

// TestNextDeadlineSkipsOnlyIdleTicks runs the same randomised fault
// schedule twice: once ticking every node every millisecond, once ticking a
// node only when its NextDeadline is due (how the agent sleeps). Every
// message and leadership change must match: a tick the deadline let us skip
// must have been one that would have done nothing.
func TestNextDeadlineSkipsOnlyIdleTicks(t *testing.T) {
	seeds := uint64(12)
	if racetest.Enabled {
		// The race pass checks a sample; scripts/test's second pass runs all.
		seeds = 3
	}
	for _, noPreempt := range []bool{false, true} {
		for seed := uint64(1); seed <= seeds; seed++ {
			eager := deadlineScenario(t, seed, noPreempt, false)
			lazy := deadlineScenario(t, seed, noPreempt, true)
			if eager != lazy {
				t.Fatalf("noPreempt=%v seed %d: ticking only at NextDeadline changed the run\n--- every tick:\n%s\n--- at deadlines:\n%s",
					noPreempt, seed, eager, lazy)
			}
			if !strings.Contains(eager, " leader leader=") {
				t.Fatalf("seed %d: no leader was ever elected: the comparison compared nothing", seed)
			}
		}
	}
}

// deadlineScenario runs 5 nodes through random faults — isolation, heal,
// partition, crash with and without a MemberDown, restart, resign,
// suspicion and its retraction — and returns the trace of every message and
// leadership change.
func deadlineScenario(t *testing.T, seed uint64, noPreempt, lazy bool) string {
	var trace []string
	nw := newNetwork(t, seq(5), func(c *Config) { c.NoPreempt = noPreempt })
	nw.lazy, nw.trace = lazy, &trace
	rng := rand.New(rand.NewPCG(seed, 99))
	nw.advance(300 * time.Millisecond)
	for range 30 {
		id := protocols.ID(1 + rng.IntN(5))
		other := protocols.ID(1 + rng.IntN(5))
		switch rng.IntN(8) {
		case 0:
			nw.isolate(id)
		case 1:
			nw.heal()
		case 2:
			nw.partition([]protocols.ID{1, 2}, []protocols.ID{3, 4, 5})
		case 3:
			if !nw.crashd[id] {
				nw.crash(id, rng.IntN(2) == 0)
			}
		case 4:
			if nw.crashd[id] {
				nw.restart(id)
			}
		case 5:
			for _, l := range nw.leaders() {
				_ = nw.nodes[l].Resign(nw.now)
			}
		case 6, 7:
			if !nw.crashd[id] && id != other {
				nw.nodes[id].Suspect(nw.now, other, rng.IntN(3) != 0)
			}
		}
		nw.deliver()
		nw.advance(time.Duration(1+rng.IntN(400)) * time.Millisecond)
	}
	nw.heal()
	nw.advance(2 * time.Second)
	return strings.Join(trace, "\n")
}

// TestNextDeadlineIsNeverStaleAfterTick checks that a node ticked at time
// now re-arms into the future, so a driver that sleeps until the deadline
// cannot spin.
func TestNextDeadlineIsNeverStaleAfterTick(t *testing.T) {
	nw := newNetwork(t, seq(4), nil)
	for step := range 3000 {
		switch step {
		case 500:
			nw.isolate(4)
		case 900:
			nw.heal()
		case 1500:
			nw.crash(4, false)
		}
		nw.advance(time.Millisecond)
		for _, id := range nw.ids {
			if nw.crashd[id] {
				continue
			}
			n := nw.nodes[id]
			n.Tick(nw.now)
			if d, ok := n.NextDeadline(nw.now); !ok || d <= nw.now {
				t.Fatalf("step %d n%d: deadline %v (armed %v) still due after Tick at %v", step, id, d.Sub(0), ok, nw.now.Sub(0))
			}
		}
		nw.deliver()
	}
}
