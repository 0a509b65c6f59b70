package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/transport"
)

// fakeCluster is a membership whose events the test feeds to the agent by
// hand (applyMember), so the agent's bookkeeping can be checked exactly.
type fakeCluster struct{ ch chan membership.Event }

func (f *fakeCluster) Events() <-chan membership.Event { return f.ch }
func (f *fakeCluster) Members() []membership.Member    { return nil }
func (f *fakeCluster) Leave(time.Duration) error       { return nil }
func (f *fakeCluster) Shutdown() error                 { return nil }

// newBareAgent builds an agent over an in-memory transport and a fake
// cluster, without running its loop: the test is the loop.
func newBareAgent(t *testing.T, protocol string) (*Agent, *transport.MemTransport, *observer.ObservedLogs) {
	a, tr, logs, _ := newBareAgentOn(t, protocol)
	return a, tr, logs
}

func newBareAgentOn(t *testing.T, protocol string) (*Agent, *transport.MemTransport, *observer.ObservedLogs, *transport.MemNetwork) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Node = config.Node{Name: "self", ID: 1, DataDir: filepath.Join(dir, "self")}
	cfg.Election.Protocol = protocol
	cfg.Election.Voters = []string{"self", "a", "b", "c"}
	cfg.API.Socket = filepath.Join(dir, "agent.sock")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	memnet := transport.NewMemNetwork()
	tr := memnet.Node(1, 0)
	core, logs := observer.New(zapcore.InfoLevel)
	a, err := New(context.Background(), cfg, Options{Logger: zap.New(core), Transport: tr, Cluster: &fakeCluster{ch: make(chan membership.Event)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.closeAll)
	return a, tr, logs, memnet
}

func member(name string, id protocols.ID, state membership.State) membership.Member {
	return membership.Member{Name: name, ID: id, Voter: true, State: state,
		Addr: fmt.Sprintf("192.168.77.%d:7946", id%250), PeerID: transport.MemPeerID(id), PeerAddr: "/mem"}
}

// TestChurnDoesNotGrow joins, hears, kills and reaps a thousand members of
// distinct names and ids, and changes one member's id a thousand times:
// every per-member structure ends where it started.
func TestChurnDoesNotGrow(t *testing.T) {
	a, tr, _ := newBareAgent(t, config.ProtocolBully)
	for i := range 1000 {
		id := protocols.ID(100 + i)
		name := fmt.Sprintf("h%d", i)
		a.applyMember(member(name, id, membership.StateAlive))
		a.heard(a.now(), id)
		a.applyMember(member(name, id, membership.StateDead))
		a.applyMember(member(name, id, membership.StateReaped))
	}
	for i := range 1000 {
		// Same name and peer id, another node.id at every restart.
		m := member("x", protocols.ID(5000+i), membership.StateAlive)
		m.PeerID = "mem-x"
		a.applyMember(m)
		a.heard(a.now(), m.ID)
	}
	if n := tr.PeerCount(); n != 1 {
		t.Errorf("transport peers after churn: %d, want 1 (x)", n)
	}
	if len(a.members) != 1 || len(a.byID) != 1 || len(a.detectors) > 1 || len(a.suspectAt) > 1 || len(a.refused) != 0 {
		t.Errorf("after churn: %d members, %d ids, %d detectors, %d suspectAt, %d refused; want 1, 1, ≤1, ≤1, 0",
			len(a.members), len(a.byID), len(a.detectors), len(a.suspectAt), len(a.refused))
	}
}

// TestIDChangeAdmitsNewIdentity: a member back under another id (same name,
// same libp2p peer id) replaces its old id at once. Before, SetPeer refused
// the peer id as belonging to the old id and the member was shut out.
func TestIDChangeAdmitsNewIdentity(t *testing.T) {
	a, tr, logs := newBareAgent(t, config.ProtocolMajority)
	old := member("a", 2, membership.StateAlive)
	old.PeerID = "mem-a"
	a.applyMember(old)
	changed := old
	changed.ID = 22
	a.applyMember(changed)
	if a.byID[22] != "a" || a.byID[2] != "" {
		t.Fatalf("ids after the change: %v", a.byID)
	}
	if tr.PeerCount() != 1 {
		t.Fatalf("transport admits %d peers, want 1 (the new id alone)", tr.PeerCount())
	}
	if logs.FilterMessage("cannot admit member").Len() != 0 {
		t.Fatalf("the new id was refused: %v", logs.FilterMessage("cannot admit member").All())
	}
}

// TestDuplicateIDRefusedLoudly: a second live member claiming an id is not
// admitted, the refusal names both addresses, and once the first holder is
// gone the second is admitted.
func TestDuplicateIDRefusedLoudly(t *testing.T) {
	a, tr, logs := newBareAgent(t, config.ProtocolMajority)
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
	if a.byID[7] != "b" || tr.PeerCount() != 1 {
		t.Fatalf("after the holder died, id 7 belongs to %q (%d peers admitted), want b", a.byID[7], tr.PeerCount())
	}
}

// TestQuorumCountsWhatTheTransportReaches: gossip lists every voter alive,
// but the transport reaches only one of them. Before, status said "3 of 4
// reachable, healthy" from gossip's view while no election message could
// get through; now it counts what the transport heard from.
func TestQuorumCountsWhatTheTransportReaches(t *testing.T) {
	a, _, _, memnet := newBareAgentOn(t, config.ProtocolMajority)
	for i, name := range []string{"a", "b", "c"} {
		a.applyMember(member(name, protocols.ID(2+i), membership.StateAlive))
	}
	st := a.status(a.now())
	if st.Members != 4 || st.Quorum.Voters != 4 {
		t.Fatalf("members %d, voters %d; want 4 and 4", st.Members, st.Quorum.Voters)
	}
	// The agent's MemTransport is on a network of its own: no peer is on
	// it, so none is reachable, whatever gossip says.
	if st.Quorum.Reachable != 1 || st.Quorum.Healthy {
		t.Fatalf("quorum %+v with no voter reachable; want 1 of 4, not healthy", st.Quorum)
	}
	// a and b come onto the network: 3 of 4.
	for _, id := range []protocols.ID{2, 3} {
		n := memnet.Node(id, 0)
		t.Cleanup(func() { n.Close() })
	}
	if st = a.status(a.now()); st.Quorum.Reachable != 3 || !st.Quorum.Healthy {
		t.Fatalf("quorum %+v with a and b reachable; want 3 of 4, healthy", st.Quorum)
	}
}
