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
	for tn.HasReady() {
		rd := tn.Ready()
		for _, m := range rd.Messages {
			if m.Kind == protocols.MsgElection {
				to = append(to, m.To)
			}
		}
		tn.Advance(rd)
	}
	slices.Sort(to)
	return to
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
