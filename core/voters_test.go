package core

import (
	"slices"
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

// recorder is a protocol that records the members MemberUp and MemberDown
// name.
type recorder struct {
	protocols.Protocol
	ups, downs *[]protocols.ID
}

func (r recorder) MemberUp(now protocols.Time, m protocols.Member) {
	*r.ups = append(*r.ups, m.ID)
	r.Protocol.MemberUp(now, m)
}

func (r recorder) MemberDown(now protocols.Time, id protocols.ID) {
	*r.downs = append(*r.downs, id)
	r.Protocol.MemberDown(now, id)
}

// TestElectionSettingsMismatchIsReported: a member whose election.prevote
// or election.check_quorum differs from this agent's (the digest's
// extension) is listed in problems, once, with both values, and stays in
// the election; an older agent that publishes no extension, and keys this
// agent does not know, give no line. A member that fixes its election
// timeout but not check_quorum comes back into the election with the
// line still there. Before, neither setting was published and nothing
// was said.
func TestElectionSettingsMismatchIsReported(t *testing.T) {
	tn, logs := newTestNode(t, "majority") // prevote and check_quorum on
	var ups, downs []protocols.ID
	tn.proto = recorder{Protocol: tn.proto, ups: &ups, downs: &downs}
	ours := tn.vt.digest
	if ours == "" || tn.vt.digestExt != "pv=1 cq=1" {
		t.Fatalf("digest %q, extension %q", ours, tn.vt.digestExt)
	}
	apply := func(name string, id protocols.ID, digest, ext string) {
		m := member(name, id, membership.StateAlive)
		m.Digest, m.DigestExt = digest, ext
		tn.applyMember(m)
	}
	apply("a", 2, ours, "pv=0 cq=1")
	apply("b", 3, ours, "")               // an older agent
	apply("c", 4, ours, "pv=1 cq=1 zz=9") // a newer one
	p := string(tn.problems())
	if !strings.Contains(p, "a runs with other election settings: election.prevote is false there, true here") ||
		strings.Contains(p, "check_quorum") || strings.Count(p, "election settings") != 1 {
		t.Fatalf("problems:\n%s\nwant one line: a's prevote", p)
	}
	if tn.settingsConflict(2) || len(downs) != 0 {
		t.Fatalf("a prevote mismatch took members out of the election: conflict %v, down %v", tn.settingsConflict(2), downs)
	}
	apply("a", 2, ours, "pv=0 cq=1") // the same again: nothing new
	if n := logs.FilterMessage("a member runs with other election settings; set them the same on every agent").Len(); n != 1 {
		t.Errorf("the mismatch was logged %d times, want once", n)
	}

	set, rest, _ := strings.Cut(ours, "|")
	other := strings.Replace(set, "et=1s", "et=2s", 1) + "|" + rest
	apply("c", 4, other, "pv=1 cq=0")
	p = string(tn.problems())
	if !tn.settingsConflict(4) || !slices.Equal(downs, []protocols.ID{4}) ||
		!strings.Contains(p, "c runs with other settings") || !strings.Contains(p, "election.check_quorum is false there, true here") {
		t.Fatalf("c with another election timeout and check_quorum: conflict %v, down %v, problems:\n%s", tn.settingsConflict(4), downs, p)
	}
	ups = nil
	apply("c", 4, ours, "pv=1 cq=0")
	p = string(tn.problems())
	if tn.settingsConflict(4) || !slices.Equal(ups, []protocols.ID{4}) ||
		strings.Contains(p, "c runs with other settings") || !strings.Contains(p, "election.check_quorum is false there") {
		t.Fatalf("c with the election timeout fixed: conflict %v, up %v, problems:\n%s", tn.settingsConflict(4), ups, p)
	}
	apply("a", 2, ours, "pv=1 cq=1")
	apply("c", 4, ours, "pv=1 cq=1")
	if p := tn.problems(); p != "" {
		t.Errorf("problems once every setting agrees:\n%s", p)
	}
}
