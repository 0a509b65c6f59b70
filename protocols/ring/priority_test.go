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

// The shared priority checks, for every algorithm.
func forAlgs(t *testing.T, check func(*testing.T, testnet.PrioBuilder[*Node])) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { check(t, prioBuilder(t, withAlg(alg))) })
	}
}

func TestRankOrder(t *testing.T)         { forAlgs(t, testnet.CheckRankOrder[*Node]) }
func TestPriorityTie(t *testing.T)       { forAlgs(t, testnet.CheckPriorityTie[*Node]) }
func TestPreemptAfterDelay(t *testing.T) { forAlgs(t, testnet.CheckPreemptAfterDelay[*Node]) }
func TestFlappingPreferredNode(t *testing.T) {
	forAlgs(t, testnet.CheckFlappingPreferredNode[*Node])
}
func TestEligibleAgainWaitsForDelay(t *testing.T) {
	forAlgs(t, testnet.CheckEligibleAgainWaitsForDelay[*Node])
}
