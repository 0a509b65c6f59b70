package bully

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

var sizes = []int{4, 8, 16, 32, 64}

// The lowest id starting is bully's worst case: every node but the top one
// runs its own election, so ELECTION and OK each number n(n-1)/2, plus n-1
// COORDINATOR messages: n²-1 in all.
func TestMessageCountLowestStarts(t *testing.T) {
	for _, n := range sizes {
		nw := newNetwork(t, seq(n), nil)
		nw.Nodes[1].Campaign(nw.Now)
		nw.Deliver()
		nw.Agreed(protocols.ID(n))
		e, ok, c := nw.Delivered[protocols.MsgElection], nw.Delivered[protocols.MsgOK], nw.Delivered[protocols.MsgCoordinator]
		t.Logf("n=%d lowest starts: election=%d ok=%d coordinator=%d total=%d (n²-1=%d)", n, e, ok, c, e+ok+c, n*n-1)
		if e != n*(n-1)/2 || ok != n*(n-1)/2 || c != n-1 {
			t.Errorf("n=%d: election=%d ok=%d coordinator=%d, want %d %d %d", n, e, ok, c, n*(n-1)/2, n*(n-1)/2, n-1)
		}
	}
}

// When the coordinator dies and the next-highest id notices first, it has no
// one to ask and announces itself to the n-2 others: O(n).
func TestMessageCountNextHighestStarts(t *testing.T) {
	for _, n := range sizes {
		nw := newNetwork(t, seq(n), nil)
		nw.Nodes[1].Campaign(nw.Now)
		nw.Deliver()
		nw.ResetCounts()
		nw.Crash(protocols.ID(n), false)
		next := protocols.ID(n - 1)
		nw.Nodes[next].MemberDown(nw.Now, protocols.ID(n))
		nw.Deliver()
		got := nw.Delivered
		t.Logf("n=%d next-highest starts: election=%d ok=%d coordinator=%d", n, got[protocols.MsgElection], got[protocols.MsgOK], got[protocols.MsgCoordinator])
		if got[protocols.MsgElection] != 0 || got[protocols.MsgOK] != 0 || got[protocols.MsgCoordinator] != n-2 {
			t.Errorf("n=%d: counts %v, want only %d coordinator", n, got, n-2)
		}
		nw.Agreed(next)
	}
}

func TestStartupElectsHighest(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		nw := newNetwork(t, []protocols.ID{3, 9, 4, 12, 7}, func(c *Config) { c.NoPreempt = noPreempt })
		nw.Advance(500 * time.Millisecond)
		e := nw.Agreed(12)
		if protocols.EpochLeader(e) != 12 {
			t.Fatalf("epoch %#x does not name leader 12", e)
		}
	}
}

func TestCoordinatorHeartbeats(t *testing.T) {
	nw := newNetwork(t, seq(4), nil)
	nw.Advance(200 * time.Millisecond)
	nw.ResetCounts()
	nw.Advance(100 * time.Millisecond)
	// 3 followers, one heartbeat each every 10ms, nothing else.
	if got := nw.Delivered[protocols.MsgHeartbeat]; got < 27 || got > 33 {
		t.Fatalf("heartbeats in 100ms: %d", got)
	}
	if len(nw.Delivered) != 1 {
		t.Fatalf("unexpected traffic in a stable cluster: %v", nw.Delivered)
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
		"heartbeat-timeout": func(nw *network) { nw.Crash(5, false) },
	}
	for name, fail := range cases {
		t.Run(name, func(t *testing.T) {
			nw := newNetwork(t, seq(5), nil)
			nw.Advance(200 * time.Millisecond)
			e1 := nw.Agreed(5)
			fail(nw)
			nw.Advance(600 * time.Millisecond)
			if e2 := nw.Agreed(4); e2 <= e1 {
				t.Fatalf("epoch did not rise: %d -> %d", e1, e2)
			}
		})
	}
}

// A recovered higher id: with preemption it bullies the healthy coordinator
// out (a second leadership change); without, it follows it.
func TestPreempt(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		nw := newNetwork(t, seq(5), func(c *Config) { c.NoPreempt = noPreempt })
		nw.Advance(200 * time.Millisecond)
		nw.Crash(5, true)
		nw.Advance(300 * time.Millisecond)
		e4 := nw.Agreed(4)
		nw.Restart(5)
		nw.Advance(500 * time.Millisecond)
		want := protocols.ID(5)
		if noPreempt {
			want = 4
		}
		if e := nw.Agreed(want); e < e4 {
			t.Fatalf("epoch went back")
		}
		// Without preemption, 5 takes over at the next election.
		if noPreempt {
			nw.Crash(4, true)
			nw.Advance(500 * time.Millisecond)
			nw.Agreed(5)
		}
	}
}

// A partition elects one coordinator per side, with distinct epochs; after
// healing the highest id wins with an epoch above both.
func TestPartitionTwoLeadersDistinctEpochs(t *testing.T) {
	nw := newNetwork(t, seq(5), nil)
	nw.Advance(200 * time.Millisecond)
	nw.Partition([]protocols.ID{1, 2}, []protocols.ID{3, 4, 5})
	nw.Advance(500 * time.Millisecond)
	l := nw.Leaders()
	if len(l) != 2 || l[0] != 2 || l[1] != 5 {
		t.Fatalf("leaders %v, want [2 5]", l)
	}
	e2, e5 := nw.Nodes[2].Status(nw.Now).Epoch, nw.Nodes[5].Status(nw.Now).Epoch
	if e2 == e5 {
		t.Fatalf("two leaders share epoch %d", e2)
	}
	nw.Heal()
	nw.Advance(500 * time.Millisecond)
	if e := nw.Agreed(5); e <= max(e2, e5) && e != e5 {
		t.Fatalf("epoch %d after heal, sides had %d and %d", e, e2, e5)
	}
}

// Announcements older than what a follower knows are ignored.
func TestStaleAnnouncementIgnored(t *testing.T) {
	nw := newNetwork(t, seq(3), nil)
	nw.Advance(200 * time.Millisecond)
	e := nw.Agreed(3)
	n1 := nw.Nodes[1]
	old := protocols.NextEpoch(0, 2)
	if old >= e {
		t.Fatalf("test setup: %d >= %d", old, e)
	}
	if err := n1.Step(nw.Now, protocols.Message{Kind: protocols.MsgCoordinator, From: 2, To: 1, Leader: 2, Epoch: old}); err != nil {
		t.Fatal(err)
	}
	if s := n1.Status(nw.Now); s.Leader != 3 || s.Epoch != e {
		t.Fatalf("stale coordinator accepted: %+v", s)
	}
}

func TestStepErrors(t *testing.T) {
	nw := newNetwork(t, seq(3), nil)
	n := nw.Nodes[1]
	for _, c := range []struct {
		m    protocols.Message
		want error
	}{
		{protocols.Message{Kind: protocols.MsgOK, From: 2, To: 2}, protocols.ErrNotAddressed},
		{protocols.Message{Kind: protocols.MsgOK, From: 9, To: 1}, protocols.ErrUnknownSender},
		{protocols.Message{Kind: protocols.MsgVote, From: 2, To: 1}, protocols.ErrUnknownKind},
		{protocols.Message{Kind: protocols.MsgRingElect, From: 2, To: 1}, protocols.ErrUnknownKind},
		{protocols.Message{Kind: 200, From: 2, To: 1}, protocols.ErrUnknownKind},
	} {
		if err := n.Step(0, c.m); !errors.Is(err, c.want) {
			t.Errorf("Step(%v) = %v, want %v", c.m, err, c.want)
		}
	}
	if n.HasReady() {
		t.Fatal("refused input produced work")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{},
		{ID: MaxID + 1},
		{ID: 1, Members: []protocols.Member{{ID: 2}, {ID: 2}}},
		{ID: 1, Members: []protocols.Member{{ID: 0}}},
		{ID: 1, HeartbeatInterval: time.Second, ElectionTimeout: time.Second},
		{ID: 1, ElectionTimeout: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	if _, err := New(Config{ID: MaxID}); err != nil {
		t.Fatal(err)
	}
}

func TestNextEpoch(t *testing.T) {
	a, b := protocols.NextEpoch(0, 1), protocols.NextEpoch(0, 2)
	if a == b || a == 0 || protocols.EpochLeader(a) != 1 || protocols.EpochLeader(b) != 2 {
		t.Fatalf("protocols.NextEpoch(0, ·) = %d, %d", a, b)
	}
	if c := protocols.NextEpoch(b, 1); c <= b || protocols.EpochLeader(c) != 1 {
		t.Fatalf("protocols.NextEpoch(%d, 1) = %d", b, c)
	}
	if protocols.NextEpoch(uint64(MaxID), MaxID) <= uint64(MaxID) {
		t.Fatal("not increasing past MaxID")
	}
}

// An isolated coordinator keeps believing it leads (bully has no lease);
// the rest elect another with a higher epoch, and after healing the old one
// yields or bullies back with a still higher epoch — never a shared one.
func TestIsolatedCoordinator(t *testing.T) {
	nw := newNetwork(t, seq(4), nil)
	nw.Advance(200 * time.Millisecond)
	e1 := nw.Agreed(4)
	nw.Isolate(4)
	nw.Advance(500 * time.Millisecond)
	if l := nw.Leaders(); len(l) != 2 {
		t.Fatalf("leaders %v, want the isolated one and a new one", l)
	}
	e3 := nw.Nodes[3].Status(nw.Now).Epoch
	if e3 <= e1 || protocols.EpochLeader(e3) != 3 {
		t.Fatalf("new epoch %d after %d", e3, e1)
	}
	nw.Heal()
	nw.Advance(500 * time.Millisecond)
	if e := nw.Agreed(4); e <= e3 {
		t.Fatalf("epoch %d after heal, not above %d", e, e3)
	}
}

// Resign, resigning alone and the epoch across restarts, as every
// highest-id election promises (protocols/internal/testnet).
func TestResign(t *testing.T) { testnet.CheckResign(t, builder(t, nil)) }

func TestResignAlone(t *testing.T) { testnet.CheckResignAlone(t, builder(t, nil)) }

func TestEpochSurvivesRestart(t *testing.T) { testnet.CheckEpochSurvivesRestart(t, builder(t, nil)) }

// builder makes networks for the shared checks.
func builder(t *testing.T, tweak func(*Config)) func(ids []protocols.ID) *testnet.Net[*Node] {
	return func(ids []protocols.ID) *testnet.Net[*Node] { return newNetwork(t, ids, tweak).Net }
}
