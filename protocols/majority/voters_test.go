package majority

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// formed runs a 3-voter, 2-observer cluster until its leader has committed
// the configuration it inherited.
func formed(t *testing.T) (*testNet, protocols.ID) {
	t.Helper()
	tn := newTestNet(3, 2, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	tn.Advance(time.Second)
	st := tn.Nodes[l].Status(tn.Now)
	if st.Committed != st.Config || st.Config.Index != 1 || st.Config.Term != st.Term {
		t.Fatalf("leader's configuration after election: %+v, want index 1 of its term, committed", st)
	}
	return tn, l
}

func change(tn *testNet, l protocols.ID, c protocols.VoterChange) error {
	err := tn.Nodes[l].ChangeVoters(tn.Now, c)
	tn.Drain(l)
	return err
}

func TestChangeVotersAddAndRemove(t *testing.T) {
	tn, l := formed(t)
	if err := change(tn, l, protocols.VoterChange{Add: "o4"}); err != nil {
		t.Fatal(err)
	}
	// One change at a time.
	if err := change(tn, l, protocols.VoterChange{Add: "o5"}); !errors.Is(err, protocols.ErrChangeInFlight) {
		t.Fatalf("second change in flight: %v, want ErrChangeInFlight", err)
	}
	tn.Advance(time.Second)
	for id, n := range tn.Nodes {
		st := n.Status(tn.Now)
		if st.Config.Voters != "n1,n2,n3,o4" || st.Committed != st.Config {
			t.Errorf("n%d: config %v committed %v", id, st.Config, st.Committed)
		}
		if tn.HS[id].Config != st.Config {
			t.Errorf("n%d: persisted %v, holds %v", id, tn.HS[id].Config, st.Config)
		}
	}
	if st := tn.Nodes[4].Status(tn.Now); st.Role != protocols.Follower {
		t.Errorf("promoted o4 is %v, want follower", st.Role)
	}
	victim := protocols.ID(1)
	if l == 1 {
		victim = 2
	}
	if err := change(tn, l, protocols.VoterChange{Remove: tn.Nodes[victim].name(victim)}); err != nil {
		t.Fatal(err)
	}
	tn.Advance(time.Second)
	if st := tn.Nodes[victim].Status(tn.Now); st.Role != protocols.Observer || st.Leader != l {
		t.Errorf("removed voter: %+v, want an observer following n%d", st, l)
	}
	// The persisted configuration wins over the configured list.
	tn.crash(victim)
	tn.start(victim)
	if st := tn.Nodes[victim].Status(tn.Now); st.Role != protocols.Observer || st.Config.Has(tn.Nodes[victim].name(victim)) {
		t.Errorf("restarted removed voter: %+v", st)
	}
}

func TestChangeVotersRefusals(t *testing.T) {
	tn, l := formed(t)
	follower := protocols.ID(1)
	if l == 1 {
		follower = 2
	}
	cases := []struct {
		on   protocols.ID
		c    protocols.VoterChange
		want error
	}{
		{follower, protocols.VoterChange{Add: "o4"}, protocols.ErrNotLeader},
		{l, protocols.VoterChange{Add: "nobody"}, protocols.ErrUnknownMember},
		{l, protocols.VoterChange{Add: "n1"}, protocols.ErrUnknownMember},
		{l, protocols.VoterChange{Remove: "o4"}, protocols.ErrUnknownMember},
	}
	for _, c := range cases {
		if err := change(tn, c.on, c.c); !errors.Is(err, c.want) {
			t.Errorf("n%d %+v: %v, want %v", c.on, c.c, err, c.want)
		}
	}
	if err := change(tn, l, protocols.VoterChange{Add: "o4", Remove: "n1"}); err == nil {
		t.Error("a change of two voters at once was accepted")
	}
	// With one other voter and o4 crashed, adding o4 would need 3 of 4
	// voters of which 2 answer.
	tn.crash(4)
	tn.crash(follower)
	tn.Advance(1500 * time.Millisecond)
	if tn.Nodes[l].Status(tn.Now).Role != protocols.Leader {
		t.Fatal("the leader lost its lease with 2 of 3 voters")
	}
	if err := change(tn, l, protocols.VoterChange{Add: "o4"}); !errors.Is(err, protocols.ErrWouldLoseQuorum) {
		t.Errorf("add with 2 of 4 reachable: %v, want ErrWouldLoseQuorum", err)
	}
}

func TestRemovedLeaderStepsDownOnceCommitted(t *testing.T) {
	tn, l := formed(t)
	if err := change(tn, l, protocols.VoterChange{Remove: tn.Nodes[l].name(l)}); err != nil {
		t.Fatal(err)
	}
	tn.Advance(5 * time.Second)
	st := tn.Nodes[l].Status(tn.Now)
	if st.Role != protocols.Observer || st.Config.Has(tn.Nodes[l].name(l)) {
		t.Fatalf("removed leader: %+v", st)
	}
	nl := tn.leader()
	if nl == protocols.None || nl == l {
		t.Fatalf("leader after removal: %d", nl)
	}
	if got := tn.Nodes[nl].Status(tn.Now); got.Term <= st.Term-1 || got.Config.Len() != 2 {
		t.Errorf("new leader %+v", got)
	}
}

// TestMismatchedBootstrapLists is the scenario in the pure core:
// n1 bootstraps with ["n1"], n2 and n3 with all three. n1 must never lead
// alone while it can hear them; it adopts the cluster's configuration.
func TestMismatchedBootstrapLists(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	c := tn.cfg
	c.ID, c.Members, c.Now, c.Voters = 1, tn.members, tn.Now, []string{"n1"}
	c.Rand = tn.Nodes[1].cfg.Rand
	n1, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	tn.Nodes[1] = n1
	tn.Drain(1)
	for range 5 {
		tn.Advance(3 * time.Second)
		tn.Isolate(1)
		tn.Advance(3 * time.Second)
		if st := tn.Nodes[1].Status(tn.Now); st.Role == protocols.Leader && st.Config.Voters == "n1" {
			t.Fatalf("n1 leads alone with its bootstrap list: %+v", st)
		}
		tn.Heal()
	}
	tn.Advance(3 * time.Second)
	st := tn.Nodes[1].Status(tn.Now)
	if st.Config.Voters != "n1,n2,n3" || st.Config.Index == 0 {
		t.Errorf("n1 did not adopt the cluster's configuration: %+v", st)
	}
	if len(n1.Problems()) == 0 {
		t.Error("n1 reports no conflict")
	}
}

// A state record from before configurations were replicated bootstraps at
// index 1, so it is never mistaken for a fresh node.
func TestUpgradedStateStartsAtIndexOne(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	c := tn.cfg
	c.ID, c.Members, c.Now, c.Rand = 1, tn.members, tn.Now, tn.Nodes[1].cfg.Rand
	c.HardState = protocols.HardState{Term: 4, Vote: 2, Epoch: 4}
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if st := n.Status(tn.Now); st.Config.Index != 1 || st.Config.Term != 0 || st.Config.Voters != "n1,n2,n3" {
		t.Fatalf("upgraded node's configuration %v", st.Config)
	}
}

// A leader that removes itself and is cut off before anyone persisted the
// change is the only node holding the new configuration; the remaining
// voter needs its vote, which it refuses to an older configuration. So the
// removed node must be able to campaign (the simulator's deadlock; Raft's
// rule): it wins with the remaining voter's vote, commits the change and
// steps down.
func TestSelfRemovedLeaderCutOffLeavesAnElectableNode(t *testing.T) {
	tn := newTestNet(2, 1, 3, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	tn.Advance(time.Second)
	v := 3 - l // the other voter of n1, n2
	tn.Isolate(l)
	if err := change(tn, l, protocols.VoterChange{Remove: tn.Nodes[l].name(l)}); err != nil {
		t.Fatal(err)
	}
	tn.Advance(5 * time.Second)
	if got := tn.Nodes[v].Status(tn.Now).Config.Voters; got != "n1,n2" {
		t.Fatalf("n%d holds [%s]; the change should not have reached it", v, got)
	}
	tn.Heal()
	tn.Advance(10 * time.Second)
	st := tn.Nodes[v].Status(tn.Now)
	if st.Role != protocols.Leader || st.Config.Voters != tn.Nodes[v].name(v) || st.Committed != st.Config {
		t.Fatalf("remaining voter: %+v, want it leading its own committed configuration", st)
	}
	if st := tn.Nodes[l].Status(tn.Now); st.Role != protocols.Observer {
		t.Errorf("removed node: %+v, want an observer", st)
	}
}

// TestLeftOutMemberStaysQuiet is the first-hour path that flapped: n1 ran
// alone first (its data directory holds [n1], committed), then n2 and n3
// start with the bootstrap list [n1,n2,n3]. n1's refusals carry [n1]; n2
// and n3 adopt it and, hearing its only voter hold it, know it committed:
// they are observers following n1 and never campaign again. Before, they
// went on pre-campaigning against n1 several times a second.
func TestLeftOutMemberStaysQuiet(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	alone := protocols.Configuration{Term: 1, Index: 1, Voters: "n1"}
	for _, id := range []protocols.ID{1, 2, 3} {
		tn.crash(id)
	}
	tn.HS[1] = protocols.HardState{Term: 1, Vote: 1, Epoch: 1, Config: alone, ConfigCommitted: true}
	// As in an agent, the leader's heartbeats reach only its voters
	// (observers learn the leader by gossip: core's fast path).
	preVotes := 0
	tn.Drop = func(m protocols.Message) bool {
		if (m.Kind == protocols.MsgPreVote || m.Kind == protocols.MsgVote) && m.From != 1 {
			preVotes++
		}
		return m.Kind == protocols.MsgHeartbeat && m.From == 1
	}
	for _, id := range []protocols.ID{1, 2, 3} {
		tn.start(id)
	}
	tn.Advance(5 * time.Second)
	preVotes = 0
	tn.Advance(30 * time.Second)
	if preVotes != 0 {
		t.Errorf("n2 and n3 sent %d (pre-)vote requests in 30 s after settling, want 0", preVotes)
	}
	for _, id := range []protocols.ID{2, 3} {
		st := tn.Nodes[id].Status(tn.Now)
		if st.Role != protocols.Observer || st.Config.Voters != "n1" || st.Committed != st.Config {
			t.Errorf("n%d: %+v, want an observer with [n1] committed", id, st)
		}
	}
	if st := tn.Nodes[1].Status(tn.Now); st.Role != protocols.Leader {
		t.Errorf("n1: %+v, want leader", st)
	}
}

// TestHeldOnlyInItsTermCommits: a configuration held by a majority of
// its voters is committed only if they held it no later than its own
// term. Voters in a later term may have adopted it from a refusal after
// electing a leader that never had it (the simulator's adopted-config
// finding): n3 holding 8.5 hears n1 and n2 hold it too, in term 9, and
// must not call it committed; hearing the same in term 8 it must. A
// granted pre-vote carries the proposed term, one above its sender's.
func TestHeldOnlyInItsTermCommits(t *testing.T) {
	conf := protocols.Configuration{Term: 8, Index: 5, Voters: "n1,n2,n3"}
	for _, tc := range []struct {
		term      uint64
		reject    bool
		committed bool
	}{{8, true, true}, {9, true, false}, {9, false, true}, {10, false, false}} {
		tn := newTestNet(3, 0, 1, baseConfig())
		c := tn.cfg
		c.ID, c.Members, c.Now, c.Rand = 3, tn.members, tn.Now, tn.Nodes[3].cfg.Rand
		c.HardState = protocols.HardState{Term: 8, Epoch: 8, Config: conf}
		n, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, from := range []protocols.ID{1, 2} {
			m := protocols.Message{Kind: protocols.MsgPreVoteResp, From: from, To: 3, Term: tc.term, Reject: tc.reject,
				ConfigTerm: conf.Term, ConfigIndex: conf.Index, Voters: conf.Voters}
			if err := n.Step(tn.Now, m); err != nil {
				t.Fatal(err)
			}
		}
		if got := n.Status(tn.Now).Committed == conf; got != tc.committed {
			t.Errorf("n1 and n2 hold %v in pre-vote answers of term %d (refused %v): committed %v, want %v",
				conf, tc.term, tc.reject, got, tc.committed)
		}
	}
}
