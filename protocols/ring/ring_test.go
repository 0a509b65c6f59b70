package ring

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

var algs = []string{AlgLCR, AlgHS, AlgPeterson}

func withAlg(alg string) func(*Config) { return func(c *Config) { c.Algorithm = alg } }

func TestStartupElectsHighest(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, []protocols.ID{3, 9, 4, 12, 7}, withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		if e := nw.Agreed(12); protocols.EpochLeader(e) != 12 {
			t.Fatalf("%s: epoch %#x does not name leader 12", alg, e)
		}
	}
}

func TestStableClusterOnlyHeartbeats(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(4), withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		nw.ResetCounts()
		nw.Advance(100 * time.Millisecond)
		if got := nw.Delivered[protocols.MsgHeartbeat]; got < 27 || got > 33 || len(nw.Delivered) != 1 {
			t.Fatalf("%s: traffic in 100ms of a stable cluster: %v", alg, nw.Delivered)
		}
	}
}

func TestFailoverSignals(t *testing.T) {
	cases := map[string]func(nw *network){
		"member-down": func(nw *network) { nw.Crash(5, true) },
		"suspect": func(nw *network) {
			nw.Crash(5, false)
			for _, id := range seq(4) {
				nw.Nodes[id].Suspect(nw.Now, 5, true)
			}
		},
		"heartbeat-timeout": func(nw *network) {
			// Undetected: the election message sent to 5 is lost and
			// the stalled round restarts — until 5 is suspected.
			nw.Crash(5, false)
			nw.Advance(500 * time.Millisecond)
			for _, id := range seq(4) {
				nw.Nodes[id].Suspect(nw.Now, 5, true)
			}
		},
	}
	for _, alg := range algs {
		for name, fail := range cases {
			t.Run(alg+"/"+name, func(t *testing.T) {
				nw := newNetwork(t, seq(5), withAlg(alg))
				nw.Advance(500 * time.Millisecond)
				e1 := nw.Agreed(5)
				fail(nw)
				nw.Advance(time.Second)
				if e2 := nw.Agreed(4); e2 <= e1 {
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
		nw.Advance(500 * time.Millisecond)
		nw.Crash(3, true)
		nw.Crash(6, true)
		nw.Advance(time.Second)
		nw.Agreed(5)
	}
}

// A recovered higher id takes over: it hears a lower leader's heartbeat and
// runs an election, so the highest live id leads.
func TestRecoveredHigherIDTakesOver(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(5), withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		nw.Crash(5, true)
		nw.Advance(time.Second)
		e4 := nw.Agreed(4)
		nw.Restart(5)
		nw.Advance(time.Second)
		if e := nw.Agreed(5); e <= e4 {
			t.Fatalf("%s: epoch %d after %d", alg, e, e4)
		}
	}
}

func TestPartitionTwoLeadersDistinctEpochs(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(6), withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		a, b := []protocols.ID{1, 2, 3}, []protocols.ID{4, 5, 6}
		nw.Partition(a, b)
		// Each side suspects the other, as phi would.
		for _, x := range a {
			for _, y := range b {
				nw.Nodes[x].Suspect(nw.Now, y, true)
				nw.Nodes[y].Suspect(nw.Now, x, true)
			}
		}
		nw.Advance(time.Second)
		l := nw.Leaders()
		if len(l) != 2 || l[0] != 3 || l[1] != 6 {
			t.Fatalf("%s: leaders %v, want [3 6]", alg, l)
		}
		e3, e6 := nw.Nodes[3].Status(nw.Now).Epoch, nw.Nodes[6].Status(nw.Now).Epoch
		if e3 == e6 {
			t.Fatalf("%s: two leaders share epoch %d", alg, e3)
		}
		nw.Heal()
		for _, x := range a {
			for _, y := range b {
				nw.Nodes[x].Suspect(nw.Now, y, false)
				nw.Nodes[y].Suspect(nw.Now, x, false)
			}
		}
		nw.Advance(time.Second)
		if e := nw.Agreed(6); e < max(e3, e6) {
			t.Fatalf("%s: epoch %d after heal, sides had %d and %d", alg, e, e3, e6)
		}
	}
}

func TestIsolatedLeader(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(4), withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		e1 := nw.Agreed(4)
		nw.Isolate(4)
		for _, id := range seq(3) {
			nw.Nodes[id].Suspect(nw.Now, 4, true)
		}
		nw.Advance(time.Second)
		if l := nw.Leaders(); len(l) != 2 {
			t.Fatalf("%s: leaders %v", alg, l)
		}
		if e3 := nw.Nodes[3].Status(nw.Now).Epoch; e3 <= e1 {
			t.Fatalf("%s: epoch %d after %d", alg, e3, e1)
		}
	}
}

func TestStaleLeaderIgnored(t *testing.T) {
	nw := newNetwork(t, seq(3), nil)
	nw.Advance(500 * time.Millisecond)
	e := nw.Agreed(3)
	old := protocols.NextEpoch(0, 2)
	for _, k := range []protocols.MessageKind{protocols.MsgRingLeader, protocols.MsgHeartbeat} {
		if err := nw.Nodes[1].Step(nw.Now, protocols.Message{Kind: k, From: 2, To: 1, Leader: 2, Epoch: old}); err != nil {
			t.Fatal(err)
		}
		if s := nw.Nodes[1].Status(nw.Now); s.Leader != 3 || s.Epoch != e {
			t.Fatalf("stale %v accepted: %+v", k, s)
		}
	}
}

// TestLeaderIgnoresElectionsFromBeforeItsEpoch: a leader that receives an
// election message sent before its own election ended (the sender had not
// seen its epoch) keeps leading; the same message sent at its epoch starts
// an election, as before. Acting on the stale one made a new leader
// abdicate and failover wait for gossip (docs/simulator.md, finding 1).
func TestLeaderIgnoresElectionsFromBeforeItsEpoch(t *testing.T) {
	for _, alg := range algs {
		for _, stale := range []bool{true, false} {
			nw := newNetwork(t, seq(3), withAlg(alg))
			nw.Advance(500 * time.Millisecond)
			e := nw.Agreed(3)
			sent := e
			if stale {
				sent = e - 1
			}
			m := protocols.Message{Kind: protocols.MsgRingElect, From: 2, To: 3, Candidate: 1, Epoch: sent}
			switch alg {
			case AlgHS:
				m = protocols.Message{Kind: protocols.MsgHSProbe, From: 2, To: 3, Candidate: 1, Phase: 0, Hops: 1, Epoch: sent}
			case AlgPeterson:
				m = protocols.Message{Kind: protocols.MsgPetersonFirst, From: 2, To: 3, Candidate: 1, Round: 9, Hops: 2, Epoch: sent}
			}
			if err := nw.Nodes[3].Step(nw.Now, m); err != nil {
				t.Fatal(err)
			}
			leads := nw.Nodes[3].Status(nw.Now).Role == protocols.Leader
			if leads != stale {
				t.Errorf("%s: a lower candidate's election sent at epoch %#x (leader's %#x): still leading = %v, want %v", alg, sent, e, leads, stale)
			}
		}
	}
}

func TestStepErrors(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(3), withAlg(alg))
		n := nw.Nodes[1]
		wrong := map[string]protocols.MessageKind{AlgLCR: protocols.MsgHSProbe, AlgHS: protocols.MsgPetersonWinner, AlgPeterson: protocols.MsgRingElect}[alg]
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
	n := nw.Nodes[1]
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
	for _, alg := range []string{"", AlgLCR, AlgHS, AlgPeterson} {
		if _, err := New(Config{ID: MaxID, Algorithm: alg}); err != nil {
			t.Fatal(err)
		}
	}
}

// Resign, resigning alone and the epoch across restarts, as every
// highest-id election promises (protocols/internal/testnet), for both
// algorithms.
func TestResign(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { testnet.CheckResign(t, builder(t, withAlg(alg))) })
	}
}

func TestResignAlone(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { testnet.CheckResignAlone(t, builder(t, withAlg(alg))) })
	}
}

func TestEpochSurvivesRestart(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { testnet.CheckEpochSurvivesRestart(t, builder(t, withAlg(alg))) })
	}
}

// builder makes networks for the shared checks.
func builder(t *testing.T, tweak func(*Config)) func(ids []protocols.ID) *testnet.Net[*Node] {
	return func(ids []protocols.ID) *testnet.Net[*Node] { return newNetwork(t, ids, tweak).Net }
}
