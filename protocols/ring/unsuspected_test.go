package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// A round sent to a member that died without anyone suspecting it is lost
// there; before acknowledgements the round stalled again and again until
// gossip declared the member dead, seconds later (docs/simulator.md,
// finding 7). Now a node whose round stalled asks for acknowledgements and
// routes past a member that gives none within an election timeout: the
// survivors agree within about three election timeouts of the leader's
// loss (one to stall, up to half of one in jitter, one for the
// acknowledgement), and the test network tells nobody of node 3's death
// at all.
func TestUnsuspectedDeadSuccessorRoutedPast(t *testing.T) {
	const et = 100 * time.Millisecond // the test network's ElectionTimeout
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			nw := newNetwork(t, seq(5), withAlg(alg))
			nw.Advance(500 * time.Millisecond)
			e1 := nw.Agreed(5)
			nw.Crash(3, false) // nobody will suspect it
			nw.Crash(5, false)
			for _, id := range []protocols.ID{1, 2, 4} {
				nw.Nodes[id].Suspect(nw.Now, 5, true)
			}
			nw.Deliver()
			d := nw.TimeToAgree(4, 10*et)
			t.Logf("%s: agreed on 4 after %v (election timeout %v)", alg, d, et)
			if d > 3*et {
				t.Errorf("took %v, more than three election timeouts: the dead member was not routed past after one stall", d)
			}
			if e2 := nw.Agreed(4); e2 <= e1 {
				t.Fatalf("epoch did not rise: %d -> %d", e1, e2)
			}
		})
	}
}

// A live member answers the acknowledgement and is not routed past: a
// round that stalled for another reason (here a lost message) does not
// make its members skip each other.
func TestAcknowledgedSuccessorKept(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			nw := newNetwork(t, seq(4), withAlg(alg))
			nw.Advance(500 * time.Millisecond)
			nw.Agreed(4)
			nw.Crash(4, false)
			for _, id := range []protocols.ID{1, 2, 3} {
				nw.Nodes[id].Suspect(nw.Now, 4, true)
			}
			// Cut 2 -> 3 for one stall: the round is lost, not a member.
			nw.Cut[[2]protocols.ID{2, 3}] = true
			nw.Deliver()
			nw.Advance(160 * time.Millisecond)
			nw.Heal()
			nw.TimeToAgree(3, time.Second)
			for _, id := range []protocols.ID{1, 2} {
				if len(nw.Nodes[id].unanswered) != 0 {
					t.Errorf("node %d routes past %v, all of them alive", id, nw.Nodes[id].unanswered)
				}
			}
		})
	}
}
