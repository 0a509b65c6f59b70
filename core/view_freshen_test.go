package core

import (
	"testing"
	"time"
)

// TestFreshenFollowsTheLeaseNotTheView: a snapshot freshened later
// carries the lease as it is now, and refuses (ok false) once the role,
// leader or epoch moved, so the shell takes a full snapshot then.
func TestFreshenFollowsTheLeaseNotTheView(t *testing.T) {
	tn, _ := newTestNode(t, ProtocolMajority, func(c *Config) { c.Election.Voters = []string{"self"} })
	before := tn.Snapshot(tn.now)
	for range 100 {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		tn.drain()
	}
	if st := tn.Status(tn.now); st.Role != "leader" {
		t.Fatalf("sole voter is %s after 5 s, want leader", st.Role)
	}
	if _, ok := tn.Freshen(tn.now, before); ok {
		t.Fatal("a snapshot from before the election was freshened across a change of role")
	}
	snap := tn.Snapshot(tn.now)
	if snap.LeaseUntil == 0 {
		t.Fatal("the leader's snapshot holds no lease")
	}
	for range 10 {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		tn.drain()
	}
	fresh, ok := tn.Freshen(tn.now, snap)
	if !ok {
		t.Fatal("Freshen refused with the same leader and epoch")
	}
	if fresh.LeaseUntil <= snap.LeaseUntil {
		t.Errorf("freshened lease until %v, was %v: the lease did not move", fresh.LeaseUntil, snap.LeaseUntil)
	}
	if got, want := fresh.At(tn.now).LeaseNS, tn.Snapshot(tn.now).At(tn.now).LeaseNS; got != want {
		t.Errorf("freshened lease %d ns, a full snapshot's %d ns", got, want)
	}
}
