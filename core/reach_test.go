package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// TestUnreachedMemberIsNotWaitedFor: a bully node not yet stable (preempt
// delay one hour) that knows no leader waits for the member ranked below
// it, which would start the election, while the transport reaches that
// member; once the transport no longer reaches it — a seed killed before
// its first election, which no detector watches — the core tells the
// protocol, and the node elects itself at its next timeout instead of
// waiting for gossip to declare the member dead. Reached again, the
// member is waited for again.
func TestUnreachedMemberIsNotWaitedFor(t *testing.T) {
	spec := ProtocolSpec{Protocol: ProtocolBully, Candidacy: protocols.Candidacy{Priority: 20}, PreemptDelay: time.Hour}
	leads := func(tn *testNode) bool {
		st, _ := tn.Leader(tn.now)
		return st.Role == protocols.Leader
	}

	tn := policyNode(t, spec, false, Unsafe{})
	tn.applyMember(member("a", 5, membership.StateAlive)) // priority 0: below this node
	tn.reachable[5] = true
	for range 10 {
		tn.at(time.Second)
	}
	if leads(tn) {
		t.Fatal("the node elected itself while the member below it, which starts the election, is reached")
	}
	tn.reachable[5] = false
	for range 3 {
		tn.at(time.Second)
	}
	if !leads(tn) {
		t.Fatal("the node still waits for a leader 3 s after the transport stopped reaching the only member below it")
	}
	if !tn.unreached[5] {
		t.Fatalf("unreached = %v, want member 5", tn.unreached)
	}

	tn = policyNode(t, spec, false, Unsafe{})
	tn.applyMember(member("a", 5, membership.StateAlive))
	tn.at(time.Second) // not reached: told
	tn.reachable[5] = true
	tn.applyMember(member("a", 5, membership.StateAlive))
	for range 10 {
		tn.at(time.Second)
	}
	if leads(tn) || tn.unreached[5] {
		t.Fatalf("reached again, the member is not waited for (leads=%v, unreached=%v)", leads(tn), tn.unreached)
	}
}
