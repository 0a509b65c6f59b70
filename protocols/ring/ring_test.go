package ring

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

var algs = []string{AlgLCR, AlgHS}

func withAlg(alg string) func(*Config) { return func(c *Config) { c.Algorithm = alg } }

func TestStartupElectsHighest(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, []protocols.ID{3, 9, 4, 12, 7}, withAlg(alg))
		nw.advance(500 * time.Millisecond)
		if e := nw.agreed(12); protocols.EpochLeader(e) != 12 {
			t.Fatalf("%s: epoch %#x does not name leader 12", alg, e)
		}
	}
}

func TestStableClusterOnlyHeartbeats(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(4), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		nw.resetCounts()
		nw.advance(100 * time.Millisecond)
		if got := nw.counts[protocols.MsgHeartbeat]; got < 27 || got > 33 || len(nw.counts) != 1 {
			t.Fatalf("%s: traffic in 100ms of a stable cluster: %v", alg, nw.counts)
		}
	}
}

func TestFailoverSignals(t *testing.T) {
	cases := map[string]func(nw *network){
		"member-down": func(nw *network) { nw.crash(5, true) },
		"suspect": func(nw *network) {
			nw.crash(5, false)
			for _, id := range seq(4) {
				nw.nodes[id].Suspect(nw.now, 5, true)
			}
		},
		"heartbeat-timeout": func(nw *network) {
			// Undetected: the election message sent to 5 is lost and
			// the stalled round restarts — until 5 is suspected.
			nw.crash(5, false)
			nw.advance(500 * time.Millisecond)
			for _, id := range seq(4) {
				nw.nodes[id].Suspect(nw.now, 5, true)
			}
		},
	}
	for _, alg := range algs {
		for name, fail := range cases {
			t.Run(alg+"/"+name, func(t *testing.T) {
				nw := newNetwork(t, seq(5), withAlg(alg))
				nw.advance(500 * time.Millisecond)
				e1 := nw.agreed(5)
				fail(nw)
				nw.advance(time.Second)
				if e2 := nw.agreed(4); e2 <= e1 {
					t.Fatalf("epoch did not rise: %d -> %d", e1, e2)
				}
			})
		}
	}
}

// The ring closes over a crashed member that is not the leader: a later
// election still goes round.
func TestRingSkipsDeadMember(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(6), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		nw.crash(3, true)
		nw.crash(6, true)
		nw.advance(time.Second)
		nw.agreed(5)
	}
}

// A recovered higher id takes over: it hears a lower leader's heartbeat and
// runs an election, so the highest live id leads.
func TestRecoveredHigherIDTakesOver(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(5), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		nw.crash(5, true)
		nw.advance(time.Second)
		e4 := nw.agreed(4)
		nw.restart(5)
		nw.advance(time.Second)
		if e := nw.agreed(5); e <= e4 {
			t.Fatalf("%s: epoch %d after %d", alg, e, e4)
		}
	}
}

func TestPartitionTwoLeadersDistinctEpochs(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(6), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		a, b := []protocols.ID{1, 2, 3}, []protocols.ID{4, 5, 6}
		nw.partition(a, b)
		// Each side suspects the other, as phi would.
		for _, x := range a {
			for _, y := range b {
				nw.nodes[x].Suspect(nw.now, y, true)
				nw.nodes[y].Suspect(nw.now, x, true)
			}
		}
		nw.advance(time.Second)
		l := nw.leaders()
		if len(l) != 2 || l[0] != 3 || l[1] != 6 {
			t.Fatalf("%s: leaders %v, want [3 6]", alg, l)
		}
		e3, e6 := nw.nodes[3].Status(nw.now).Epoch, nw.nodes[6].Status(nw.now).Epoch
		if e3 == e6 {
			t.Fatalf("%s: two leaders share epoch %d", alg, e3)
		}
		nw.heal()
		for _, x := range a {
			for _, y := range b {
				nw.nodes[x].Suspect(nw.now, y, false)
				nw.nodes[y].Suspect(nw.now, x, false)
			}
		}
		nw.advance(time.Second)
		if e := nw.agreed(6); e < max(e3, e6) {
			t.Fatalf("%s: epoch %d after heal, sides had %d and %d", alg, e, e3, e6)
		}
	}
}

func TestIsolatedLeader(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(4), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		e1 := nw.agreed(4)
		nw.isolate(4)
		for _, id := range seq(3) {
			nw.nodes[id].Suspect(nw.now, 4, true)
		}
		nw.advance(time.Second)
		if l := nw.leaders(); len(l) != 2 {
			t.Fatalf("%s: leaders %v", alg, l)
		}
		if e3 := nw.nodes[3].Status(nw.now).Epoch; e3 <= e1 {
			t.Fatalf("%s: epoch %d after %d", alg, e3, e1)
		}
	}
}

func TestResign(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(4), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		e1 := nw.agreed(4)
		if err := nw.nodes[3].Resign(nw.now); !errors.Is(err, protocols.ErrNotLeader) {
			t.Fatalf("%s: Resign on follower: %v", alg, err)
		}
		if err := nw.nodes[4].Resign(nw.now); err != nil {
			t.Fatal(err)
		}
		nw.deliver()
		if e2 := nw.agreed(3); e2 <= e1 {
			t.Fatalf("%s: epoch %d after resign, was %d", alg, e2, e1)
		}
		nw.advance(time.Second)
		nw.agreed(3) // 4 does not take it back
		nw.crash(3, true)
		nw.advance(time.Second)
		nw.agreed(4) // but wins the next election
	}
}

func TestResignAlone(t *testing.T) {
	nw := newNetwork(t, seq(2), nil)
	nw.advance(500 * time.Millisecond)
	nw.crash(1, true)
	if err := nw.nodes[2].Resign(nw.now); !errors.Is(err, protocols.ErrNoTransferTarget) {
		t.Fatalf("Resign alone: %v", err)
	}
	if nw.nodes[2].Status(nw.now).Role != protocols.Leader {
		t.Fatal("failed Resign changed the role")
	}
}

func TestEpochSurvivesRestart(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(3), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		e1 := nw.agreed(3)
		for _, id := range seq(3) {
			nw.crash(id, false)
		}
		for _, id := range seq(3) {
			nw.restart(id)
		}
		nw.advance(time.Second)
		if e2 := nw.agreed(3); e2 <= e1 {
			t.Fatalf("%s: epoch after full restart %d, before %d", alg, e2, e1)
		}
	}
}

func TestStaleLeaderIgnored(t *testing.T) {
	nw := newNetwork(t, seq(3), nil)
	nw.advance(500 * time.Millisecond)
	e := nw.agreed(3)
	old := protocols.NextEpoch(0, 2)
	for _, k := range []protocols.MessageKind{protocols.MsgRingLeader, protocols.MsgHeartbeat} {
		if err := nw.nodes[1].Step(nw.now, protocols.Message{Kind: k, From: 2, To: 1, Leader: 2, Epoch: old}); err != nil {
			t.Fatal(err)
		}
		if s := nw.nodes[1].Status(nw.now); s.Leader != 3 || s.Epoch != e {
			t.Fatalf("stale %v accepted: %+v", k, s)
		}
	}
}

func TestStepErrors(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(3), withAlg(alg))
		n := nw.nodes[1]
		wrong := protocols.MsgHSProbe
		if alg == AlgHS {
			wrong = protocols.MsgRingElect
		}
		for _, c := range []struct {
			m    protocols.Message
			want error
		}{
			{protocols.Message{Kind: protocols.MsgRingLeader, From: 2, To: 2}, protocols.ErrNotAddressed},
			{protocols.Message{Kind: protocols.MsgRingLeader, From: 9, To: 1}, protocols.ErrUnknownSender},
			{protocols.Message{Kind: protocols.MsgElection, From: 2, To: 1}, protocols.ErrUnknownKind},
			{protocols.Message{Kind: wrong, From: 2, To: 1}, protocols.ErrUnknownKind},
			{protocols.Message{Kind: 200, From: 2, To: 1}, protocols.ErrUnknownKind},
		} {
			if err := n.Step(0, c.m); !errors.Is(err, c.want) {
				t.Errorf("%s: Step(%v) = %v, want %v", alg, c.m, err, c.want)
			}
		}
		if n.HasReady() {
			t.Fatal("refused input produced work")
		}
	}
}

// Malformed or runaway election messages are dropped rather than relayed
// for ever.
func TestRunawayMessagesDropped(t *testing.T) {
	nw := newNetwork(t, seq(3), withAlg(AlgHS))
	n := nw.nodes[1]
	for _, m := range []protocols.Message{
		{Kind: protocols.MsgHSProbe, From: 3, To: 1, Candidate: 3, Phase: 1, Hops: 5},
		{Kind: protocols.MsgHSProbe, From: 3, To: 1, Candidate: 3, Phase: 40, Hops: 1},
		{Kind: protocols.MsgHSProbe, From: 3, To: 1, Candidate: 77, Phase: 0, Hops: 1},
		{Kind: protocols.MsgHSReply, From: 3, To: 1, Candidate: 3, Hops: 100},
	} {
		if err := n.Step(0, m); err != nil {
			t.Fatal(err)
		}
		if len(n.out.Pending()) != 0 {
			t.Fatalf("%v relayed: %v", m, n.out.Pending())
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{},
		{ID: MaxID + 1},
		{ID: 1, Members: []protocols.Member{{ID: 2}, {ID: 2}}},
		{ID: 1, Algorithm: "paxos"},
		{ID: 1, HeartbeatInterval: time.Second, ElectionTimeout: time.Second},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	for _, alg := range []string{"", AlgLCR, AlgHS} {
		if _, err := New(Config{ID: MaxID, Algorithm: alg}); err != nil {
			t.Fatal(err)
		}
	}
}
