package sim_test

import (
	"testing"

	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// TestRingUnsuspectedDeadReplays replays the three core-ring schedules
// of docs/simulator.md's finding 7 under the strict failover bound (7
// election timeouts, 1.4 s, below gossip's earliest death declaration).
// Each sent a round to a member that had died without being suspected,
// so the round stalled until gossip declared it dead, 4–5.2 s after the
// probe's crash: a detector dropped on a leadership change
// (11817633586490456822), a detector whose history held a healed fault's
// gaps (3736811556870878061), and a leader nobody heard announce itself
// (11769803791402734189, where the node to route past is itself the
// leader, relaying a higher candidate). A node whose round stalled now
// asks for acknowledgements and routes past a member that gives none
// within an election timeout (protocols/ring). The other six
// failed with the first version of that rule (batch 318402 of core-ring
// at 8 election timeouts): a follower relaying a higher member's round
// to the dead member dropped what it awaited at each heartbeat of its
// leader.
func TestRingUnsuspectedDeadReplays(t *testing.T) {
	for _, seed := range []uint64{11817633586490456822, 3736811556870878061, 11769803791402734189,
		16243897853922314029, 9534452771303837070, 13971356892182622950, 4876789253665263503,
		970006854015412844, 14078299190979605356} {
		o, err := registry.Options("core-ring")
		if err != nil {
			t.Fatal(err)
		}
		o.Checks.FailoverBound = registry.StrictFailoverETs * o.ElectionTimeout
		res, err := sim.Run(o, seed)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Errorf("seed %d violates:\n%v", seed, res.Violation)
		}
	}
}

// TestRingSlowSuccessorKeptReplay replays a ring-hs/health schedule that
// lost its liveness while receivers had half an election timeout to
// acknowledge: a slow link made live members look dead, and the rounds
// routed past them never completed. With a whole election timeout it
// elects (and did before acknowledgements).
func TestRingSlowSuccessorKeptReplay(t *testing.T) {
	c, err := registry.LookupCell("ring-hs/health")
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Options()
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(o, 17251487395253541591)
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation != nil {
		t.Fatalf("seed 17251487395253541591 violates:\n%v", res.Violation)
	}
}
