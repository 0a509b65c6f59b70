package bully

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// sent takes n's Ready and returns its messages as "kind->to" strings.
func sent(n *Node) []string {
	if !n.HasReady() {
		return nil
	}
	rd := n.Ready()
	n.Advance(rd)
	var out []string
	for _, m := range rd.Messages {
		out = append(out, m.Kind.String()+"->"+string(rune('0'+m.To)))
	}
	return out
}

// A follower runs at most one election per coordinator epoch on
// ELECTIONs from below, and none on an ELECTION that predates its
// coordinator: it answers OK and leaves the sender to the coordinator.
// Without this, late ELECTIONs in a failover set off waves of restarts
// (TestBullyNoStorm in sim/cmd/electcost).
func TestFollowerVouchesForLiveCoordinator(t *testing.T) {
	now := protocols.Time(0)
	n, err := New(Config{ID: 3, Members: testnet.Members(seq(5)), Now: now, NoPreempt: true})
	if err != nil {
		t.Fatal(err)
	}
	old := protocols.NextEpoch(0, 5)
	cur := protocols.NextEpoch(old, 4)
	step := func(m protocols.Message) []string {
		t.Helper()
		now = now.Add(time.Millisecond)
		m.To = 3
		if err := n.Step(now, m); err != nil {
			t.Fatal(err)
		}
		return sent(n)
	}
	step(protocols.Message{Kind: protocols.MsgCoordinator, From: 4, Leader: 4, Epoch: cur})

	// The sender had not seen our coordinator's epoch: OK, no election.
	if got := step(protocols.Message{Kind: protocols.MsgElection, From: 1, Epoch: old}); len(got) != 1 || got[0] != "OK->1" {
		t.Fatalf("stale ELECTION: sent %v, want only OK->1", got)
	}
	// The sender knew it and still calls an election: run, once.
	if got := step(protocols.Message{Kind: protocols.MsgElection, From: 2, Epoch: cur}); len(got) != 3 {
		t.Fatalf("first ELECTION in the epoch: sent %v, want OK->2 and ELECTION to 4 and 5", got)
	}
	step(protocols.Message{Kind: protocols.MsgOK, From: 4, Epoch: cur})
	step(protocols.Message{Kind: protocols.MsgCoordinator, From: 4, Leader: 4, Epoch: cur})
	if s := n.Status(now); s.Role != protocols.Follower || s.Leader != 4 {
		t.Fatalf("after the reassurance: %v of %d, want follower of 4", s.Role, s.Leader)
	}
	if got := step(protocols.Message{Kind: protocols.MsgElection, From: 1, Epoch: cur}); len(got) != 1 || got[0] != "OK->1" {
		t.Fatalf("second ELECTION in the epoch: sent %v, want only OK->1", got)
	}
}
