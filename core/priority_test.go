package core

import (
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// electionTargets ticks tn once and returns the ids its ELECTION messages
// go to.
func (tn *testNode) electionTargets() []protocols.ID {
	tn.now = tn.now.Add(10 * time.Millisecond)
	tn.Tick(tn.now)
	var to []protocols.ID
	for _, m := range tn.sent(protocols.MsgElection) {
		to = append(to, m.To)
	}
	slices.Sort(to)
	return to
}

// sent carries out every pending Ready and returns its messages of kind.
func (tn *testNode) sent(kind protocols.MessageKind) []protocols.Message {
	var out []protocols.Message
	for tn.HasReady() {
		rd := tn.Ready()
		for _, m := range rd.Messages {
			if m.Kind == kind {
				out = append(out, m)
			}
		}
		tn.Advance(rd)
	}
	return out
}

// TestPriorityReachesBully: this node's priority (its candidacy) and the
// members' (gossip metadata, membership.Member.Priority) rank bully's
// election — node 1 at priority 20 sends ELECTION only to member 3 at
// priority 30, not to 5 and 7 at 0 — and preempt_delay reaches it: a
// lower-ranked coordinator's heartbeat is followed while the node is not
// yet stable, preempted without a delay.
func TestPriorityReachesBully(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully, Candidacy: protocols.Candidacy{Priority: 20}}, false, Unsafe{})
	p := member("p", 3, membership.StateAlive)
	p.Priority = 30
	tn.applyMember(p)
	tn.applyMember(member("a", 5, membership.StateAlive))
	tn.applyMember(member("b", 7, membership.StateAlive))
	if to := tn.electionTargets(); !slices.Equal(to, []protocols.ID{3}) {
		t.Fatalf("ELECTION sent to %v, want [3], the only member ranked above this one", to)
	}

	for _, delay := range []time.Duration{0, time.Hour} {
		tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully, Candidacy: protocols.Candidacy{Priority: 20}, PreemptDelay: delay}, false, Unsafe{})
		tn.applyMember(member("b", 7, membership.StateAlive))
		tn.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 7, To: 1, Leader: 7, Epoch: bullyEpoch(1, 7)})
		st, _ := tn.Leader(tn.now)
		if preempted := st.Role == protocols.Leader; preempted != (delay == 0) {
			t.Errorf("preempt_delay %v: after a lower-ranked coordinator's heartbeat the node leads=%v (%+v)", delay, preempted, st)
		}
	}
}

// suspect makes the detector suspect member id, without ticking the
// protocol (a tick would start the election the tests look at).
func (tn *testNode) suspect(t *testing.T, id protocols.ID) {
	t.Helper()
	for range 10 {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.heard(id)
	}
	tn.now = tn.now.Add(5 * time.Second)
	tn.checkDetectors(tn.now)
	tn.drain()
	if !tn.suspected[id] {
		t.Fatalf("member %d not suspected after 5 s of silence", id)
	}
}

// TestGossipPriorityChangeReachesBully: a member whose gossip metadata
// changes its priority while it stays alive (an agent restarted with
// another node.priority before gossip declared it dead) is ranked by the
// new one at once. Before, bully kept the priority the member had when it
// came up until it went down and up or sent a message: node 1 (priority
// 20) sent ELECTION to nobody although member 3 now publishes 30.
//
// While the detector suspects the member the update waits (the protocol's
// MemberUp would also clear the suspicion) and is handed over when the
// member is heard again; a member out of the election for its settings is
// not brought back by it.
func TestGossipPriorityChangeReachesBully(t *testing.T) {
	setup := func() (*testNode, membership.Member) {
		tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully, Candidacy: protocols.Candidacy{Priority: 20}}, false, Unsafe{})
		p := member("p", 3, membership.StateAlive)
		tn.applyMember(p)
		tn.applyMember(member("a", 5, membership.StateAlive))
		tn.applyMember(member("b", 7, membership.StateAlive))
		p.Priority = 30
		return tn, p
	}

	tn, p := setup()
	tn.applyMember(p)
	if to := tn.electionTargets(); !slices.Equal(to, []protocols.ID{3}) {
		t.Errorf("after p's metadata raised its priority to 30, ELECTION sent to %v, want [3]", to)
	}

	tn, p = setup()
	tn.suspect(t, 3)
	tn.applyMember(p)
	if to := tn.electionTargets(); len(to) != 0 {
		t.Errorf("ELECTION sent to %v while 3 is suspected: the priority update cleared the protocol's suspicion", to)
	}

	tn, p = setup()
	tn.suspect(t, 3)
	tn.applyMember(p)
	tn.heard(3)
	tn.drain()
	if to := tn.electionTargets(); !slices.Equal(to, []protocols.ID{3}) {
		t.Errorf("3 heard again after its priority changed while suspected: ELECTION sent to %v, want [3]", to)
	}

	tn, p = setup()
	p.Priority, p.Digest = 0, "ring alg=lcr" // another protocol: out of the election
	tn.applyMember(p)
	if !tn.settingsConflict(3) {
		t.Fatal("a member running ring is not a settings conflict for bully")
	}
	p.Priority = 30
	tn.applyMember(p)
	if to := tn.electionTargets(); len(to) != 0 {
		t.Errorf("ELECTION sent to %v: a member whose settings disagree was brought back by its priority change", to)
	}
}

// TestGossipPriorityChangeReachesRing: the same for ring. Node 1 (priority
// 5) relays an election round carrying member 2, whose metadata raised its
// priority from 0 to 10 (the round comes from member 3, so 2's own
// messages cannot have told it): it forwards 2, which ranks above it now.
// Before, it ranked 2 at 0 and replaced the round by its own candidacy.
func TestGossipPriorityChangeReachesRing(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolRing, RingAlgorithm: "lcr", Candidacy: protocols.Candidacy{Priority: 5}}, false, Unsafe{})
	p := member("p", 2, membership.StateAlive)
	tn.applyMember(p)
	tn.applyMember(member("q", 3, membership.StateAlive))
	p.Priority = 10
	tn.applyMember(p)
	if err := tn.Step(tn.now, protocols.Message{Kind: protocols.MsgRingElect, From: 3, To: 1, Candidate: 2, Hops: 1}); err != nil {
		t.Fatal(err)
	}
	var cands []protocols.ID
	for _, m := range tn.sent(protocols.MsgRingElect) {
		cands = append(cands, m.Candidate)
	}
	if !slices.Equal(cands, []protocols.ID{2}) {
		t.Errorf("election messages sent for candidates %v, want [2]: 2's priority 10 ranks it above this node's 5", cands)
	}
}
