package ring

import (
	"testing"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestNextDeadlineSkipsOnlyIdleTicks: ticking a node only at its
// NextDeadline, as the agent does, changes nothing in a randomised fault
// schedule with lost election messages, so that rounds stall
// (testnet.CheckSkipsOnlyIdleTicks), for every algorithm.
func TestNextDeadlineSkipsOnlyIdleTicks(t *testing.T) {
	seeds := uint64(12)
	if racetest.Enabled {
		// The race pass checks a sample; scripts/test's second pass runs all.
		seeds = 3
	}
	testnet.CheckSkipsOnlyIdleTicks(t, seeds, algs, true, func(alg string) *testnet.Net[*Node] {
		return newNetwork(t, seq(5), func(c *Config) { c.Algorithm = alg }).Net
	})
}

// TestNextDeadlineIsNeverStaleAfterTick checks that a node ticked at time
// now re-arms into the future, so a driver that sleeps until the deadline
// cannot spin.
func TestNextDeadlineIsNeverStaleAfterTick(t *testing.T) {
	testnet.CheckNeverStaleAfterTick(t, newNetwork(t, seq(4), nil).Net)
}
