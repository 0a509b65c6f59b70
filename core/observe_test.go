package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// TestNewObserverIsGreeted: a leader announces itself again as soon as an
// observer appears, instead of leaving it to wait up to the refresh
// interval (docs/simulator.md, finding 4); observers appearing together
// cost one more announcement newcomerGap later, not one each.
func TestNewObserverIsGreeted(t *testing.T) {
	tn, _ := newTestNode(t, "majority", func(c *Config) {
		c.Election.Voters = []string{"self"}
		c.Gossip = true
	})
	for i := 0; i < 100 && tn.ProtocolStatus(tn.now).Role != protocols.Leader; i++ {
		tn.at(50 * time.Millisecond)
	}
	if tn.ProtocolStatus(tn.now).Role != protocols.Leader {
		t.Fatal("a sole voter did not lead")
	}
	tn.at(time.Second)
	before := tn.announced
	for i, name := range []string{"o2", "o3", "o4"} {
		m := member(name, protocols.ID(i+2), membership.StateAlive)
		tn.applyMember(m)
	}
	if got := tn.announced - before; got != 1 {
		t.Errorf("%d announcements as three observers appeared, want 1 at once", got)
	}
	tn.at(newcomerGap)
	tn.at(newcomerGap)
	if got := tn.announced - before; got != 2 {
		t.Errorf("%d announcements within %v of three observers appearing, want 2", got, 2*newcomerGap)
	}
}
