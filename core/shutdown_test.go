package core

import (
	"testing"

	"github.com/conclave-agent/conclave/membership"
)

// TestShutdownSoleLeaderStopsAtOnce: a sole voter has nobody to hand
// over to, so its stop is done at once, and says why.
func TestShutdownSoleLeaderStopsAtOnce(t *testing.T) {
	tn := soleLeader(t)
	if asked, _ := tn.Stopping(); asked {
		t.Fatal("stopping before Shutdown")
	}
	tn.Shutdown(tn.now)
	tn.drain()
	if asked, done := tn.Stopping(); !asked || !done {
		t.Fatalf("sole leader: asked=%v done=%v, want both", asked, done)
	}
	if tn.logs.FilterMessage("stopping as leader: no other voter is reachable to hand leadership to").Len() != 1 {
		t.Fatalf("no log line says why: %v", tn.logs.All())
	}
}

// TestShutdownFollowerStopsAtOnce: a node that does not lead has nothing
// to hand over.
func TestShutdownFollowerStopsAtOnce(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self", "a", "b"}}, false, Unsafe{})
	tn.applyMember(member("a", 2, membership.StateAlive))
	tn.Shutdown(tn.now)
	tn.drain()
	if asked, done := tn.Stopping(); !asked || !done {
		t.Fatalf("follower: asked=%v done=%v, want both", asked, done)
	}
}
