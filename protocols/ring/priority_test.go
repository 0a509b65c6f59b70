package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// prioBuilder builds networks whose members carry the given priorities,
// each node's own in its Candidacy, with the given preempt delay.
func prioBuilder(t *testing.T, tweak func(*Config)) testnet.PrioBuilder[*Node] {
	return func(ids []protocols.ID, prio map[protocols.ID]uint8, delay time.Duration) *testnet.Net[*Node] {
		nw := newNetwork(t, ids, func(c *Config) {
			c.Members = testnet.MembersWith(ids, prio)
			c.Candidacy.Priority = prio[c.ID]
			c.PreemptDelay = delay
			if tweak != nil {
				tweak(c)
			}
		}).Net
		nw.Priorities = prio
		return nw
	}
}

func TestRankOrder(t *testing.T)         { testnet.CheckRankOrder(t, prioBuilder(t, nil)) }
func TestPriorityTie(t *testing.T)       { testnet.CheckPriorityTie(t, prioBuilder(t, nil)) }
func TestPreemptAfterDelay(t *testing.T) { testnet.CheckPreemptAfterDelay(t, prioBuilder(t, nil)) }
func TestFlappingPreferredNode(t *testing.T) {
	testnet.CheckFlappingPreferredNode(t, prioBuilder(t, nil))
}
func TestEligibleAgainWaitsForDelay(t *testing.T) {
	testnet.CheckEligibleAgainWaitsForDelay(t, prioBuilder(t, nil))
}
