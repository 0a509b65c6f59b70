package core

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// soleLeader is a sole voter that leads, knowing member a (id 2) alive
// and reachable.
func soleLeader(t *testing.T) *testNode {
	t.Helper()
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self"}}, true, Unsafe{})
	tn.at(time.Second)
	if st, _ := tn.Leader(tn.now); st.Role != protocols.Leader {
		t.Fatalf("the sole voter does not lead: %+v", st)
	}
	tn.reachable[2] = true
	tn.applyMember(member("a", 2, membership.StateAlive))
	return tn
}

// settledVoters drains tn and returns the voter results it carried.
func settledVoters(tn *testNode) []VoterResult {
	var out []VoterResult
	for tn.HasReady() {
		rd := tn.Ready()
		out = append(out, rd.VoterResults...)
		for _, p := range rd.Peers {
			if p.Remove {
				delete(tn.probed, p.ID)
			} else {
				tn.probed[p.ID] = p.Probe
			}
		}
		tn.Advance(rd)
	}
	return out
}

// TestProposeVotersRefusesAtOnce: a member the leader does not know, or
// one that is down, is refused before the protocol sees the change, and
// the refusal changes nothing (no heartbeats start to it).
func TestProposeVotersRefusesAtOnce(t *testing.T) {
	tn := soleLeader(t)
	if _, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "ghost"}); !errors.Is(err, ErrChangeRefused) {
		t.Fatalf("adding an unknown member: %v, want ErrChangeRefused", err)
	}
	tn.applyMember(member("b", 3, membership.StateDead))
	if _, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "b"}); !errors.Is(err, ErrChangeRefused) {
		t.Fatalf("adding a dead member: %v, want ErrChangeRefused", err)
	}
	if len(tn.vt.extra) != 0 {
		t.Fatalf("a refused change started heartbeats to %v", tn.vt.extra)
	}
	bully := policyNode(t, ProtocolSpec{Protocol: ProtocolBully}, false, Unsafe{})
	if _, err := bully.ProposeVoters(bully.now, protocols.VoterChange{Add: "a"}); !errors.Is(err, ErrNoVoters) {
		t.Fatalf("bully: %v, want ErrNoVoters", err)
	}
}

// TestProposeVotersRetryIsBounded: adding a member that never answers the
// leader's heartbeats is retried by the core's own timer, not the
// shell's, and settles with the protocol's refusal once two election
// timeouts pass; NextWake names that moment, so an idle shell wakes for
// it.
func TestProposeVotersRetryIsBounded(t *testing.T) {
	tn := soleLeader(t)
	token, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "a"})
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	if rs := settledVoters(tn); len(rs) != 0 {
		t.Fatalf("settled before anyone answered: %+v", rs)
	}
	deadline := tn.now.Add(addRetryETs * time.Second)
	if next, _ := tn.NextWake(tn.now, time.Hour); next > deadline {
		t.Fatalf("next wake %v is after the retry's end %v", next, deadline)
	}
	var rs []VoterResult
	for tn.now < deadline && len(rs) == 0 {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		rs = settledVoters(tn)
		if st, _ := tn.Leader(tn.now); st.Role != protocols.Leader {
			t.Fatalf("at %v the sole voter stopped leading: %+v", tn.now, st)
		}
	}
	if len(rs) != 1 || rs[0].Token != token || !errors.Is(rs[0].Err, protocols.ErrWouldLoseQuorum) {
		t.Fatalf("after the retry's end: %+v; want token %d settled with ErrWouldLoseQuorum", rs, token)
	}
	if len(tn.voterReqs) != 0 {
		t.Fatalf("%d requests still wait", len(tn.voterReqs))
	}
}

// TestAddedMemberProbedWhileChangeWaits: no voter probes an observer, so
// the leader probes the member it is adding while the change waits, and
// stops once the change ends.
func TestAddedMemberProbedWhileChangeWaits(t *testing.T) {
	tn := soleLeader(t)
	settledVoters(tn)
	checkProbed(t, tn, map[protocols.ID]bool{2: false})
	if _, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "a"}); err != nil {
		t.Fatalf("propose: %v", err)
	}
	settledVoters(tn)
	checkProbed(t, tn, map[protocols.ID]bool{2: true})
	var rs []VoterResult
	for end := tn.now.Add(time.Minute); len(rs) == 0 && tn.now < end; {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		rs = settledVoters(tn)
	}
	if len(rs) != 1 {
		t.Fatalf("the change did not settle: %+v", rs)
	}
	checkProbed(t, tn, map[protocols.ID]bool{2: false})
}

// TestProposeVotersWaitsForReach: a member the transport has not reached
// yet, and that nobody probed, is not refused at once: the change waits
// while the leader probes it and sends it heartbeats, and is refused as
// unreachable only when the retry ends, at least addRetryMin later.
func TestProposeVotersWaitsForReach(t *testing.T) {
	tn := soleLeader(t)
	tn.reachable[2] = false
	settledVoters(tn)
	start := tn.now
	token, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "a"})
	if err != nil {
		t.Fatalf("propose: %v, want a wait", err)
	}
	var rs []VoterResult
	for end := tn.now.Add(time.Minute); len(rs) == 0 && tn.now < end; {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		rs = settledVoters(tn)
	}
	if len(rs) != 1 || rs[0].Token != token || !errors.Is(rs[0].Err, ErrChangeRefused) {
		t.Fatalf("settled %+v; want token %d refused as unreachable", rs, token)
	}
	if waited := tn.now.Sub(start); waited < addRetryMin {
		t.Fatalf("refused after %v, before addRetryMin (%v)", waited, addRetryMin)
	}
	if st, _ := tn.Leader(tn.now); st.Config.Has("a") {
		t.Fatalf("an unreachable member was proposed: %v", st.Config)
	}

	// Reached during the wait, it goes on to the protocol, which waits
	// for its answers to the leader's heartbeats (nobody answers here)
	// and refuses it for that, not as unreachable.
	tn.reachable[2] = false
	if _, err := tn.ProposeVoters(tn.now, protocols.VoterChange{Add: "a"}); err != nil {
		t.Fatalf("propose again: %v", err)
	}
	tn.now = tn.now.Add(100 * time.Millisecond)
	tn.reachable[2] = true
	rs = nil
	for end := tn.now.Add(time.Minute); len(rs) == 0 && tn.now < end; {
		tn.now = tn.now.Add(50 * time.Millisecond)
		tn.Tick(tn.now)
		rs = settledVoters(tn)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, protocols.ErrWouldLoseQuorum) {
		t.Fatalf("reached during the wait: settled %+v; want the protocol's ErrWouldLoseQuorum", rs)
	}
}
