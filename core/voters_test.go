package core

import (
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// TestRemovedVoterIsToldSo: a voter whose members all publish a newer
// configuration that leaves it out reports it once, with what to do.
// Before, a voter removed while it was away kept its old configuration
// and nothing said so (a removed voter gets no heartbeats).
func TestRemovedVoterIsToldSo(t *testing.T) {
	tn, _ := newTestNode(t, "majority")
	old, err := protocols.NewConfiguration(2, 5, []string{"self", "a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	newer, err := protocols.NewConfiguration(3, 7, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	tn.proto = reconfigured{Protocol: tn.proto, conf: old}
	tn.Tick(tn.now)
	tn.drain()
	for i, name := range []string{"a", "b", "c"} {
		m := member(name, protocols.ID(i+2), membership.StateAlive)
		m.Digest = makeDigest(tn.digestSettings(), newer)
		tn.applyMember(m)
	}
	problems := tn.problems()
	if got := strings.Count(string(problems), "leaves this agent out"); got != 1 {
		t.Fatalf("problems say %d times that the cluster left this agent out, want once:\n%s", got, problems)
	}
	if !strings.Contains(string(problems), "agent voters add self") {
		t.Errorf("problems do not say how to make it vote again:\n%s", problems)
	}
	// Added back: the problem goes.
	back, err := protocols.NewConfiguration(3, 9, []string{"self", "a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	tn.proto = reconfigured{Protocol: tn.proto, conf: back}
	for i, name := range []string{"a", "b", "c"} {
		m := member(name, protocols.ID(i+2), membership.StateAlive)
		m.Digest = makeDigest(tn.digestSettings(), back)
		tn.applyMember(m)
	}
	if p := tn.problems(); strings.Contains(string(p), "leaves this agent out") {
		t.Errorf("still reported once added back:\n%s", p)
	}
}
