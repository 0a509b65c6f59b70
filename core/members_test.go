package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// testNode is a Node over a fake transport: the test is the loop. peers is
// the transport's peer table as the node's Ready output leaves it.
type testNode struct {
	*Node
	peers     map[protocols.ID]string
	reachable map[protocols.ID]bool
	// probed is the transport's probe choice per peer (SetProbed).
	probed map[protocols.ID]bool
	// announced counts the announcements handed out for gossip.
	announced int
	// hooks lists the transitions the hooks fired for.
	hooks []Transition
	now   protocols.Time
	logs  *observer.ObservedLogs
}

// newTestShell is a testNode's shell side, before its Node is built.
func newTestShell() *testNode {
	return &testNode{peers: make(map[protocols.ID]string), reachable: make(map[protocols.ID]bool),
		probed: make(map[protocols.ID]bool), now: protocols.Time(time.Second)}
}

func newTestNode(t *testing.T, protocol string, opts ...func(*Config)) (*testNode, *observer.ObservedLogs) {
	t.Helper()
	obs, logs := observer.New(zapcore.InfoLevel)
	tn := newTestShell()
	cfg := Config{
		Election: ProtocolSpec{
			Protocol: protocol, Self: protocols.Member{ID: 1, Name: "self"},
			Voters:          []string{"self", "a", "b", "c"},
			ElectionTimeout: time.Second, HeartbeatInterval: 50 * time.Millisecond,
			PreVote: true, CheckQuorum: true, MaxClockDrift: 0.01,
			Now: tn.now, Rand: NewRand(1, 2),
		},
		Detector:  phi.Config{Threshold: 8, MaxSamples: 100, MinStdDev: 10 * time.Millisecond, AcceptablePause: 200 * time.Millisecond, FirstHeartbeatEstimate: 50 * time.Millisecond},
		Reachable: func(id protocols.ID) bool { return tn.reachable[id] },
		Logger:    zap.New(obs).Sugar(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.Node = n
	tn.drain()
	return tn, logs
}

// drain carries out every Ready as the agent would, keeping the peer table.
func (tn *testNode) drain() {
	for tn.HasReady() {
		rd := tn.Ready()
		tn.announced += len(rd.Announcements)
		if rd.Transition != nil {
			tn.hooks = append(tn.hooks, *rd.Transition)
		}
	peers:
		for _, p := range rd.Peers {
			if p.Remove {
				delete(tn.peers, p.ID)
				delete(tn.probed, p.ID)
			} else {
				tn.probed[p.ID] = p.Probe
				for id, pid := range tn.peers {
					if pid == p.PeerID && id != p.ID {
						// The transport refuses a peer id another id holds.
						continue peers
					}
				}
				tn.peers[p.ID] = p.PeerID
			}
		}
		tn.Advance(rd)
	}
}

func (tn *testNode) applyMember(m membership.Member) {
	tn.ApplyMember(tn.now, m)
	tn.drain()
}

func (tn *testNode) heard(id protocols.ID) {
	tn.Node.heard(tn.now, id)
}

func member(name string, id protocols.ID, state membership.State) membership.Member {
	return membership.Member{Name: name, ID: id, State: state,
		Addr: fmt.Sprintf("192.168.77.%d:7946", id%250), PeerID: fmt.Sprintf("mem-%d", id), PeerAddr: "/mem"}
}

// TestChurnDoesNotGrow joins, hears, kills and reaps a thousand members of
// distinct names and ids, and changes one member's id a thousand times:
// every per-member structure ends where it started.
func TestChurnDoesNotGrow(t *testing.T) {
	a, _ := newTestNode(t, ProtocolBully)
	for i := range 1000 {
		id := protocols.ID(100 + i)
		name := fmt.Sprintf("h%d", i)
		a.applyMember(member(name, id, membership.StateAlive))
		a.heard(id)
		a.applyMember(member(name, id, membership.StateDead))
		a.applyMember(member(name, id, membership.StateReaped))
	}
	for i := range 1000 {
		// Same name and peer id, another node.id at every restart.
		m := member("x", protocols.ID(5000+i), membership.StateAlive)
		m.PeerID = "mem-x"
		a.applyMember(m)
		a.heard(m.ID)
	}
	for i := range 100 {
		// Suspected, a new priority held for it (priorityChanged), dead.
		id := protocols.ID(9000 + i)
		m := member(fmt.Sprintf("s%d", i), id, membership.StateAlive)
		a.applyMember(m)
		a.suspect(t, id)
		m.Priority = 7
		a.applyMember(m)
		m.State = membership.StateDead
		a.applyMember(m)
		m.State = membership.StateReaped
		a.applyMember(m)
	}
	if n := len(a.peers); n != 1 {
		t.Errorf("transport peers after churn: %d, want 1 (x)", n)
	}
	if len(a.members) != 1 || len(a.byID) != 1 || len(a.watching) > 1 || len(a.live.peers) > 1 || len(a.live.stats) > 1 || len(a.refused) != 0 || len(a.priorityDue) != 0 {
		t.Errorf("after churn: %d members, %d ids, %d watched, %d detectors, %d histograms, %d refused, %d priorities held; want 1, 1, ≤1, ≤1, ≤1, 0, 0",
			len(a.members), len(a.byID), len(a.watching), len(a.live.peers), len(a.live.stats), len(a.refused), len(a.priorityDue))
	}
}

// TestIDChangeAdmitsNewIdentity: a member back under another id (same name,
// same libp2p peer id) replaces its old id at once. Before, SetPeer refused
// the peer id as belonging to the old id and the member was shut out.
func TestIDChangeAdmitsNewIdentity(t *testing.T) {
	a, logs := newTestNode(t, ProtocolMajority)
	old := member("a", 2, membership.StateAlive)
	old.PeerID = "mem-a"
	a.applyMember(old)
	changed := old
	changed.ID = 22
	a.applyMember(changed)
	if a.byID[22] != "a" || a.byID[2] != "" {
		t.Fatalf("ids after the change: %v", a.byID)
	}
	if len(a.peers) != 1 {
		t.Fatalf("transport admits %d peers, want 1 (the new id alone)", len(a.peers))
	}
	if a.peers[22] != "mem-a" {
		t.Fatalf("the new id was not admitted to the transport: %v", a.peers)
	}
	if logs.FilterMessage("member changed identity").Len() != 1 {
		t.Fatalf("the identity change was not logged: %v", logs.All())
	}
}

// TestDuplicateIDRefusedLoudly: a second live member claiming an id is not
// admitted, the refusal names both addresses, and once the first holder is
// gone the second is admitted.
func TestDuplicateIDRefusedLoudly(t *testing.T) {
	a, logs := newTestNode(t, ProtocolMajority)
	first := member("a", 7, membership.StateAlive)
	second := member("b", 7, membership.StateAlive)
	second.Addr, second.PeerID = "192.168.77.99:7946", "mem-b"
	a.applyMember(first)
	a.applyMember(second)
	a.applyMember(second) // an update: logged once, not again
	if a.byID[7] != "a" {
		t.Fatalf("id 7 belongs to %q, want the first holder a", a.byID[7])
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 {
		t.Fatalf("want one ERROR for the conflict, got %d: %v", len(errs), errs)
	}
	fields := fmt.Sprint(errs[0].ContextMap())
	for _, want := range []string{first.Addr, second.Addr, "a", "b"} {
		if !strings.Contains(fields, want) {
			t.Errorf("refusal does not name %q: %s", want, fields)
		}
	}
	// A member claiming this agent's own id is refused too.
	self := member("imposter", 1, membership.StateAlive)
	self.PeerID = "mem-imposter"
	a.applyMember(self)
	if a.byID[1] != "" || logs.FilterLevelExact(zapcore.ErrorLevel).Len() != 2 {
		t.Fatalf("a member claiming this agent's id was admitted (%v) or not logged", a.byID)
	}
	// The first holder dies: the second is admitted.
	first.State = membership.StateDead
	a.applyMember(first)
	if a.byID[7] != "b" || len(a.peers) != 1 {
		t.Fatalf("after the holder died, id 7 belongs to %q (%d peers admitted), want b", a.byID[7], len(a.peers))
	}
}

// TestQuorumCountsWhatTheTransportReaches: gossip lists every voter alive,
// but the transport reaches only one of them. Before, status said "3 of 4
// reachable, healthy" from gossip's view while no election message could
// get through; now it counts what the transport heard from.
func TestQuorumCountsWhatTheTransportReaches(t *testing.T) {
	a, _ := newTestNode(t, ProtocolMajority)
	for i, name := range []string{"a", "b", "c"} {
		a.applyMember(member(name, protocols.ID(2+i), membership.StateAlive))
	}
	st := a.Status(a.now)
	if st.Members != 4 || st.Quorum.Voters != 4 {
		t.Fatalf("members %d, voters %d; want 4 and 4", st.Members, st.Quorum.Voters)
	}
	// The transport has heard from none of them, whatever gossip says.
	if st.Quorum.Reachable != 1 || st.Quorum.Healthy {
		t.Fatalf("quorum %+v with no voter reachable; want 1 of 4, not healthy", st.Quorum)
	}
	// a and b come onto the network: 3 of 4.
	a.reachable[2], a.reachable[3] = true, true
	if st = a.Status(a.now); st.Quorum.Reachable != 3 || !st.Quorum.Healthy {
		t.Fatalf("quorum %+v with a and b reachable; want 3 of 4, healthy", st.Quorum)
	}
}

// TestPriorityFromGossipPerElection: a member's [elections.NAME] priority,
// published in its gossip metadata, reaches that election's protocol
// (bully and ring rank members by it before hearing from them), and
// only that election's: the default one keeps its node.priority.
func TestPriorityFromGossipPerElection(t *testing.T) {
	def, defLogs := newTestNode(t, ProtocolBully)
	jobs, jobsLogs := newTestNode(t, ProtocolBully, func(c *Config) { c.Name = "jobs" })
	m := member("b", 2, membership.StateAlive)
	def.applyMember(m)
	jobs.applyMember(m)
	m.ElectionPriorities = "jobs=9,web=3"
	def.applyMember(m)
	jobs.applyMember(m)
	changed := zap.String("member", "b")
	if n := defLogs.FilterMessage("member priority changed").FilterField(changed).Len(); n != 0 {
		t.Errorf("the default election saw %d priority changes, want none", n)
	}
	got := jobsLogs.FilterMessage("member priority changed").FilterField(changed).All()
	if len(got) != 1 || got[0].ContextMap()["priority"] != uint8(9) {
		t.Errorf("jobs: priority changes %v, want one to 9", got)
	}
	if p := jobs.protoMember(m).Priority; p != 9 {
		t.Errorf("jobs ranks b at %d, want 9", p)
	}
	if p := def.protoMember(m).Priority; p != 0 {
		t.Errorf("default ranks b at %d, want its node.priority 0", p)
	}
}

// TestMemberOutsideNamedElection: an agent whose gossip metadata says it
// does not run a named election takes no part in it (bully would count
// it a candidate that never answers), leaves it when it restarts
// without it, and joins it when it runs it again; the default election
// counts it throughout.
func TestMemberOutsideNamedElection(t *testing.T) {
	def, _ := newTestNode(t, ProtocolBully)
	jobs, _ := newTestNode(t, ProtocolBully, func(c *Config) { c.Name = "jobs" })
	apply := func(m membership.Member) {
		def.applyMember(m)
		jobs.applyMember(m)
	}
	m := member("b", 2, membership.StateAlive)
	m.Elections = membership.ElectionsBitmap([]string{"reports"})
	apply(m)
	if _, in := jobs.members["b"]; in {
		t.Fatal("jobs counts b, which runs only reports")
	}
	if _, in := def.members["b"]; !in {
		t.Fatal("the default election does not count b")
	}
	m.Elections = membership.ElectionsBitmap([]string{"reports", "jobs"})
	apply(m)
	if got := jobs.members["b"]; got.State != membership.StateAlive {
		t.Fatalf("jobs: b is %v after it runs jobs, want alive", got.State)
	}
	m.Elections = membership.ElectionsBitmap(nil)
	apply(m)
	if got := jobs.members["b"]; got.State != membership.StateLeft {
		t.Errorf("jobs: b is %v after it restarted without jobs, want left", got.State)
	}
	if got := def.members["b"]; got.State != membership.StateAlive {
		t.Errorf("default: b is %v, want alive", got.State)
	}
	m.Elections = 0 // an agent that does not say: counted, as before
	apply(m)
	if got := jobs.members["b"]; got.State != membership.StateAlive {
		t.Errorf("jobs: b is %v when it publishes no bitmap, want alive", got.State)
	}
}
