package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// TestIneligibleNodeNeverLeads: the highest id turned ineligible hands
// over, is never given leadership while ineligible (it relays every candidate and
// usurps nobody), follows the new leader, and once eligible
// again stands in the next election.
func TestIneligibleNodeNeverLeads(t *testing.T) {
	nw := newNetwork(t, seq(3), nil)
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(3)
	nw.Nodes[3].SetCandidacy(nw.Now, protocols.Candidacy{Ineligible: true})
	nw.Drain(3)
	for range 40 { // 2 s: many election timeouts
		nw.Advance(50 * time.Millisecond)
		if nw.Nodes[3].Status(nw.Now).Role == protocols.Leader {
			t.Fatal("the ineligible node leads")
		}
	}
	if st := nw.Nodes[3].Status(nw.Now); st.Leader != 2 {
		t.Fatalf("the ineligible node follows %d, want 2", st.Leader)
	}
	nw.Agreed(2)
	// Eligible again, it spares the leader that replaced it, as after a
	// resign (no flapping back), and stands in the next election.
	nw.Nodes[3].SetCandidacy(nw.Now, protocols.Candidacy{})
	nw.Drain(3)
	nw.Advance(time.Second)
	nw.Agreed(2)
	nw.Crash(2, true)
	nw.Advance(time.Second)
	nw.Agreed(3)
}

// TestIneligibleAloneKeepsLeading: with no other live member to hand over
// to, an ineligible leader keeps leading (docs/health.md), and hands
// over once a member is back.
func TestIneligibleAloneKeepsLeading(t *testing.T) {
	nw := newNetwork(t, seq(2), nil)
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(2)
	nw.Crash(1, true)
	nw.Nodes[2].SetCandidacy(nw.Now, protocols.Candidacy{Ineligible: true})
	nw.Drain(2)
	nw.Advance(500 * time.Millisecond)
	if nw.Nodes[2].Status(nw.Now).Role != protocols.Leader {
		t.Fatal("an ineligible leader alone stopped leading")
	}
	nw.Restart(1)
	nw.Advance(2 * time.Second)
	nw.Agreed(1)
}
