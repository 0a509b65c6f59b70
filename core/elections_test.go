package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

func namedNode(t *testing.T, name, protocol string) *core.Node {
	t.Helper()
	n, err := core.New(core.Config{
		Name: name,
		Election: core.ProtocolSpec{
			Protocol: protocol, Voters: []string{"n1", "n2"}, Self: protocols.Member{ID: 1, Name: "n1"},
			ElectionTimeout: 200 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
			Rand: core.NewRand(1, 1),
		},
		Detector: phi.DefaultConfig(),
		Gossip:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.ApplyMember(0, membership.Member{Name: "n2", ID: 2, State: membership.StateAlive, PeerID: "p2", Version: core.NamedElectionsVersion})
	return n
}

// A message or an announcement of one election handed to another's node
// is refused: the shell routes by name, and a slip there must not feed one
// election's protocol with another's votes.
func TestElectionsDoNotMix(t *testing.T) {
	jobs := namedNode(t, "jobs", core.ProtocolBully)
	def := namedNode(t, core.DefaultElection, core.ProtocolBully)
	hb := protocols.Message{Kind: protocols.MsgCoordinator, From: 2, To: 1, Epoch: 5<<20 | 2, Leader: 2}
	if err := jobs.Step(1, hb); err == nil || !strings.Contains(err.Error(), "election") {
		t.Errorf("jobs took a default-election message: %v", err)
	}
	named := hb
	named.Election = "jobs"
	if err := def.Step(1, named); err == nil {
		t.Error("the default election took a message of jobs")
	}
	if err := jobs.Step(1, named); err != nil {
		t.Errorf("jobs refused its own message: %v", err)
	}
	if st := jobs.Status(2); st.Leader != "n2" {
		t.Errorf("jobs leader = %q, want n2", st.Leader)
	}
	if st := def.Status(2); st.Leader != "" {
		t.Errorf("default leader = %q, want none: it never heard of one", st.Leader)
	}
	ann := observe.Announcement{Leader: 2, Epoch: 7, Seq: 1, Election: "other"}.Append(nil)
	if name, ok := core.ElectionOf(ann); !ok || name != "other" {
		t.Errorf("ElectionOf = %q, %v", name, ok)
	}
	if err := namedNode(t, "jobs", core.ProtocolMajority).Gossiped(3, ann); err == nil {
		t.Error("jobs took an announcement of election other")
	}
	if name, ok := core.ElectionOf(observe.Announcement{Leader: 2, Epoch: 7, Seq: 1}.Append(nil)); !ok || name != core.DefaultElection {
		t.Errorf("ElectionOf(unnamed) = %q, %v", name, ok)
	}
}

// Every message a named election sends carries its name.
func TestNamedElectionStampsMessages(t *testing.T) {
	jobs := namedNode(t, "jobs", core.ProtocolBully)
	jobs.Tick(protocols.Time(5 * time.Second))
	sent := 0
	for jobs.HasReady() {
		rd := jobs.Ready()
		for _, m := range rd.Messages {
			sent++
			if m.Election != "jobs" {
				t.Errorf("message %v has election %q", m, m.Election)
			}
		}
		jobs.Advance(rd)
	}
	if sent == 0 {
		t.Fatal("jobs sent nothing after its election timeout")
	}
	if _, err := core.New(core.Config{Name: "Bad Name"}); err == nil {
		t.Error("New accepted a bad election name")
	}
}

// This build must itself count as running named elections, or its named
// elections would leave out every agent of the same build.
func TestThisBuildRunsNamedElections(t *testing.T) {
	if membership.ProtocolVersion < core.NamedElectionsVersion {
		t.Fatalf("membership.ProtocolVersion %d < core.NamedElectionsVersion %d", membership.ProtocolVersion, core.NamedElectionsVersion)
	}
}

// Under majority a session makes a voter eligible; an agent that is not
// a voter can never lead, so its session is refused, naming the voters.
// Without candidacy = "session" there are no sessions to open.
func TestSessionsRefused(t *testing.T) {
	mk := func(voters []string, required bool) *core.Node {
		n, err := core.New(core.Config{
			Election: core.ProtocolSpec{
				Protocol: core.ProtocolMajority, Voters: voters, Self: protocols.Member{ID: 1, Name: "n1"},
				ElectionTimeout: 200 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
				Rand: core.NewRand(1, 1), MaxClockDrift: 0.01,
			},
			Detector: phi.DefaultConfig(),
			Session:  core.SessionPolicy{Required: required},
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := mk([]string{"n2", "n3"}, true).OpenSession(1); !errors.Is(err, core.ErrNotCandidate) || !strings.Contains(err.Error(), "n2") {
		t.Errorf("session on a non-voter: %v, want ErrNotCandidate naming the voters", err)
	}
	if _, err := mk([]string{"n1"}, false).OpenSession(1); !errors.Is(err, core.ErrNoSessions) {
		t.Errorf("session without candidacy = session: %v, want ErrNoSessions", err)
	}
	n := mk([]string{"n1"}, true)
	n.SetHealth(1, core.Health{})
	n.Tick(protocols.Time(time.Second))
	if st := n.Status(protocols.Time(time.Second)); st.Leader != "" {
		t.Fatalf("a single voter without a session leads: %+v", st)
	}
	if _, err := n.OpenSession(protocols.Time(time.Second)); err != nil {
		t.Fatal(err)
	}
	now := protocols.Time(time.Second)
	for range 40 {
		now = now.Add(50 * time.Millisecond)
		n.Tick(now)
		for n.HasReady() {
			n.Advance(n.Ready())
		}
	}
	if st := n.Status(now); st.Leader != "n1" {
		t.Fatalf("a single voter holding a session does not lead: %+v", st)
	}
}
