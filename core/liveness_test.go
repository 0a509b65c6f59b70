package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// sharedRings builds two ring elections of one agent ("default" and
// "jobs"), sharing live when it is not nil, both following member 3.
func sharedRings(t *testing.T, live *Liveness) (a, b *testNode) {
	t.Helper()
	mk := func(name string) *testNode {
		tn, _ := newTestNode(t, ProtocolRing, func(c *Config) { c.Name, c.Liveness = name, live })
		tn.applyMember(member("b", 2, membership.StateAlive))
		tn.applyMember(member("c", 3, membership.StateAlive))
		return tn
	}
	a, b = mk(""), mk("jobs")
	e3 := uint64(1<<20 | 3)
	for range 10 {
		a.now, b.now = a.now.Add(50*time.Millisecond), b.now.Add(50*time.Millisecond)
		a.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 3, To: 1, Leader: 3, Epoch: e3, Term: e3})
		b.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 3, To: 1, Leader: 3, Epoch: e3, Term: e3, Election: "jobs"})
	}
	return a, b
}

// TestSharedLivenessOneDetectorPerPeer: two elections of one agent keep
// one detector for their common leader, fed once per beat (both
// elections' heartbeats of one frame count as one sample), and suspect
// it at the same moment once it falls silent. Without sharing each keeps
// its own.
func TestSharedLivenessOneDetectorPerPeer(t *testing.T) {
	cfg := phi.Config{Threshold: 8, MaxSamples: 100, MinStdDev: 10 * time.Millisecond, AcceptablePause: 200 * time.Millisecond, FirstHeartbeatEstimate: 50 * time.Millisecond}
	live, err := NewLiveness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sharedRings(t, live)
	if a.live != b.live || len(live.peers) != 1 || live.peers[3].watchers != 2 {
		t.Fatalf("shared: %d detectors, want 1 watched by both elections", len(live.peers))
	}
	if n := live.peers[3].d.Samples(); n != 2+9 {
		t.Errorf("shared detector holds %d samples, want 11 (2 priors + 9 gaps: one per beat, not per election)", n)
	}
	wa, _ := a.NextWake(a.now, time.Hour)
	wb, _ := b.NextWake(b.now, time.Hour)
	if wa != wb {
		t.Errorf("the elections would wake apart for one peer's silence: %v and %v", wa, wb)
	}
	a.now, b.now = wa, wb
	a.Tick(a.now)
	b.Tick(b.now)
	if !a.suspected[3] || !b.suspected[3] {
		t.Errorf("silent leader suspected: default %v, jobs %v; want both", a.suspected[3], b.suspected[3])
	}

	a2, b2 := sharedRings(t, nil)
	if a2.live == b2.live {
		t.Error("Nodes without a shared Liveness share detectors")
	}
}

// TestSharedLivenessHeardInAnyElection: a peer that keeps heartbeating
// in one election is alive in the other, whose detector it keeps fresh;
// it is dropped only when no election watches it.
func TestSharedLivenessHeardInAnyElection(t *testing.T) {
	cfg := phi.Config{Threshold: 8, MaxSamples: 100, MinStdDev: 10 * time.Millisecond, AcceptablePause: 200 * time.Millisecond, FirstHeartbeatEstimate: 50 * time.Millisecond}
	live, err := NewLiveness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sharedRings(t, live)
	e3 := uint64(1<<20 | 3)
	for range 40 { // two seconds: far past the detector's suspicion
		a.now, b.now = a.now.Add(50*time.Millisecond), b.now.Add(50*time.Millisecond)
		a.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 3, To: 1, Leader: 3, Epoch: e3, Term: e3})
		b.Tick(b.now)
	}
	if b.suspected[3] {
		t.Error("jobs suspects a leader that heartbeats this agent in the default election")
	}
	a.unwatch(3)
	if live.peers[3] == nil {
		t.Fatal("the detector was dropped while jobs still watches its leader")
	}
	b.unwatch(3)
	if live.peers[3] != nil {
		t.Error("the detector outlived every watch")
	}
	if _, err := New(Config{Election: a.cfg.Election, Detector: phi.DefaultConfig(), Liveness: live}); err == nil {
		t.Error("a Node took a shared Liveness made with other detector settings")
	}
}
