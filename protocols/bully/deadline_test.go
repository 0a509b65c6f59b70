package bully

import (
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestNextDeadlineSkipsOnlyIdleTicks runs the same randomised fault
// schedule (testnet.DeadlineScenario) twice: once ticking every node every
// millisecond, once ticking a node only when its NextDeadline is due (how
// the agent sleeps). Every message and leadership change must match: a tick
// the deadline let us skip must have been one that would have done nothing.
func TestNextDeadlineSkipsOnlyIdleTicks(t *testing.T) {
	seeds := uint64(12)
	if racetest.Enabled {
		// The race pass checks a sample; scripts/test's second pass runs all.
		seeds = 3
	}
	for _, noPreempt := range []bool{false, true} {
		for seed := uint64(1); seed <= seeds; seed++ {
			run := func(lazy bool) string {
				nw := newNetwork(t, seq(5), func(c *Config) { c.NoPreempt = noPreempt })
				nw.Lazy = lazy
				return testnet.DeadlineScenario(nw.Net, seed, false)
			}
			eager, lazy := run(false), run(true)
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

// TestNextDeadlineIsNeverStaleAfterTick checks that a node ticked at time
// now re-arms into the future, so a driver that sleeps until the deadline
// cannot spin.
func TestNextDeadlineIsNeverStaleAfterTick(t *testing.T) {
	testnet.CheckNeverStaleAfterTick(t, newNetwork(t, seq(4), nil).Net)
}
