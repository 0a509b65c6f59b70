package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/leakcheck"
	"github.com/conclave-agent/conclave/internal/loopback"
	"github.com/conclave-agent/conclave/internal/tcpfwd"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// freePort returns a loopback port free for TCP and UDP.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// testCluster runs real agents in this process: real memberlist, real
// libp2p, real sockets and files.
type testCluster struct {
	t      *testing.T
	cfgs   []config.Config
	agents []*Agent
	cancel []context.CancelFunc
	done   []chan error
	logs   []*observer.ObservedLogs
}

func newTestCluster(t *testing.T, n int, protocol string, key string) *testCluster {
	tc := &testCluster{t: t}
	dir := t.TempDir()
	var binds, voters []string
	for i := 1; i <= n; i++ {
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		voters = append(voters, fmt.Sprintf("n%d", i))
	}
	for i := 0; i < n; i++ {
		c := config.Default()
		c.Node = config.Node{Name: voters[i], ID: uint64(i + 1), DataDir: filepath.Join(dir, voters[i])}
		c.Gossip.Bind = binds[i]
		c.Gossip.Profile = config.ProfileLocal
		c.Gossip.Key = key
		if i > 0 {
			c.Gossip.Join = []string{binds[0]} // one seed address
		}
		c.Transport.Listen = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freePort(t))
		c.Election.Protocol = protocol
		c.Election.Voters = voters
		c.Election.ElectionTimeout = config.Duration(500 * time.Millisecond)
		c.Detector.HeartbeatInterval = config.Duration(50 * time.Millisecond)
		c.API.Socket = filepath.Join(dir, voters[i], "agent.sock")
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		tc.cfgs = append(tc.cfgs, c)
	}
	tc.agents = make([]*Agent, n)
	tc.cancel = make([]context.CancelFunc, n)
	tc.done = make([]chan error, n)
	tc.logs = make([]*observer.ObservedLogs, n)
	t.Cleanup(tc.stopAll)
	return tc
}

func (tc *testCluster) start(i int) error {
	core, logs := observer.New(zap.InfoLevel)
	tc.logs[i] = logs
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, tc.cfgs[i], Options{Logger: zap.New(core)})
	if err != nil {
		cancel()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tc.agents[i], tc.cancel[i], tc.done[i] = a, cancel, done
	return nil
}

func (tc *testCluster) startAll() {
	for i := range tc.cfgs {
		if err := tc.start(i); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// stop stops agent i, gracefully or as a crash, and waits for Run.
func (tc *testCluster) stop(i int, crash bool) {
	if tc.agents[i] == nil {
		return
	}
	if crash {
		tc.agents[i].Kill()
	} else {
		tc.cancel[i]()
	}
	if err := <-tc.done[i]; err != nil {
		tc.t.Errorf("n%d Run: %v", i+1, err)
	}
	tc.cancel[i]()
	tc.agents[i] = nil
}

func (tc *testCluster) stopAll() {
	for i := range tc.agents {
		tc.stop(i, false)
	}
}

func (tc *testCluster) status(i int) (api.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return backend{tc.agents[i]}.Status(ctx, false)
}

// waitAgreed waits until every running agent reports the same leader with
// an epoch above minEpoch, and exactly that leader reports itself leader.
func (tc *testCluster) waitAgreed(minEpoch uint64, within time.Duration) api.Status {
	tc.t.Helper()
	deadline := time.Now().Add(within)
	var last []api.Status
	for time.Now().Before(deadline) {
		last = last[:0]
		agreed := true
		var leader api.Status
		for i, a := range tc.agents {
			if a == nil {
				continue
			}
			st, err := tc.status(i)
			if err != nil {
				tc.t.Fatalf("n%d status: %v", i+1, err)
			}
			last = append(last, st)
			if st.Leader == "" || st.Epoch <= minEpoch || (leader.Leader != "" && (st.Leader != leader.Leader || st.Epoch != leader.Epoch)) {
				agreed = false
			}
			if st.Role == api.RoleLeader {
				leader = st
			}
			if leader.Leader == "" && st.Leader != "" {
				leader = api.Status{Leader: st.Leader, Epoch: st.Epoch}
			}
		}
		if agreed && leader.Node != "" {
			return leader
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatalf("no agreement on a leader above epoch %d within %v; last statuses: %+v", minEpoch, within, last)
	return api.Status{}
}

func TestSingleNodeElectsItselfAtOnce(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	tc.startAll()
	st := tc.waitAgreed(0, 10*time.Second)
	if st.Leader != "n1" || st.Role != api.RoleLeader || st.LeaseMS <= 0 || !st.Quorum.Healthy {
		t.Fatalf("status %+v, want n1 leading with a lease", st)
	}
}

func TestSecondAgentOnSameDataDirRefuses(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	tc.startAll()
	cfg := tc.cfgs[0]
	cfg.API.Socket = cfg.API.Socket + "2"
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "in use by another agent") {
		t.Fatalf("second agent on the same data directory: %v", err)
	}
}

// Five in-process nodes on real memberlist and libp2p discover each other
// from one seed address, elect a leader, and elect another with a higher
// epoch when the leader crashes.
func TestFiveNodesElectAndFailOver(t *testing.T) {
	for _, protocol := range []string{config.ProtocolMajority, config.ProtocolBully, config.ProtocolRing} {
		t.Run(protocol, func(t *testing.T) {
			tc := newTestCluster(t, 5, protocol, "")
			tc.startAll()
			first := tc.waitAgreed(0, 30*time.Second)
			if protocol != config.ProtocolMajority && first.Leader != "n5" {
				t.Errorf("%s elected %s, want the highest id n5", protocol, first.Leader)
			}
			var idx int
			fmt.Sscanf(first.Leader, "n%d", &idx)
			// Every agent counts all five as members it hears.
			full := api.Quorum{Voters: 5, Reachable: 5, Healthy: true}
			tc.eventuallyStatus(t, 20*time.Second, func(i int, st api.Status) bool { return st.Members == 5 && st.Quorum == full })
			tc.stop(idx-1, true)
			second := tc.waitAgreed(first.Epoch, 30*time.Second)
			if second.Leader == first.Leader || second.Epoch <= first.Epoch {
				t.Fatalf("after killing %s (epoch %d): leader %s epoch %d", first.Leader, first.Epoch, second.Leader, second.Epoch)
			}
			if protocol != config.ProtocolMajority && second.Leader != "n4" {
				t.Errorf("%s elected %s after n5 died, want n4", protocol, second.Leader)
			}
			if protocol == config.ProtocolMajority {
				// Four of the five configured voters are left, still a quorum.
				left := api.Quorum{Voters: 5, Reachable: 4, Healthy: true}
				tc.eventuallyStatus(t, 30*time.Second, func(i int, st api.Status) bool { return st.Quorum == left })
			}
		})
	}
}

// eventuallyStatus waits until ok holds for the status of every running
// agent, failing the test after within with the last statuses seen.
func (tc *testCluster) eventuallyStatus(t *testing.T, within time.Duration, ok func(i int, st api.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var last []string
		all := true
		for i := range tc.agents {
			if tc.agents[i] == nil {
				continue
			}
			st, err := tc.status(i)
			if err != nil || !ok(i, st) {
				all = false
				last = append(last, fmt.Sprintf("%d: %+v %v", i, st, err))
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("statuses did not settle within %v: %v", within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A graceful stop of the leader hands leadership over first.
func TestGracefulStopHandsOver(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority, "")
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)
	var idx int
	fmt.Sscanf(first.Leader, "n%d", &idx)
	tc.stop(idx-1, false)
	if tc.logs[idx-1].FilterMessage("handing leadership over before shutdown").Len() == 0 {
		t.Errorf("leader did not hand over on shutdown; logs: %v", tc.logs[idx-1].All())
	}
	second := tc.waitAgreed(first.Epoch, 30*time.Second)
	if second.Leader == first.Leader {
		t.Fatalf("leader unchanged after stop")
	}
}

func TestConsistentStatus(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority, "")
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)
	var idx int
	fmt.Sscanf(first.Leader, "n%d", &idx)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := backend{tc.agents[idx-1]}.Status(ctx, true)
	if err != nil || st.Role != api.RoleLeader {
		t.Fatalf("consistent status on the leader: %+v, %v", st, err)
	}

	bt := newTestCluster(t, 1, config.ProtocolBully, "")
	bt.startAll()
	if _, err := (backend{bt.agents[0]}).Status(ctx, true); !errors.Is(err, localapi.ErrConsistentUnsupported) {
		t.Fatalf("consistent status on bully: %v, want ErrConsistentUnsupported", err)
	}
}

// A node with another cluster key can neither join gossip nor take part in
// the election, and its log says why.
func TestWrongClusterKeyIsRefused(t *testing.T) {
	keyA := "uVw5I2cfmTQ2f9wFVnH5o3bM0Ibq1SL2pTzDk6yTdPw="
	keyB := "Hn8sW5cT3nMZ8b3lmtVt3YbYkqHj7uBfmYWkq6hVt0U="
	tc := newTestCluster(t, 3, config.ProtocolMajority, keyA)
	// n3 has the wrong key; n1 and n2 form the cluster.
	tc.cfgs[2].Gossip.Key = keyB
	tc.startAll()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if tc.logs[2].FilterField(zap.String("hint", "looks like a gossip key mismatch: [gossip] key must be the same on every node, or unset on every node")).Len() > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tc.logs[2].FilterFieldKey("hint").Len() == 0 {
		t.Errorf("n3's log never named the key mismatch; logs: %v", tc.logs[2].All())
	}
	for _, i := range []int{0, 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ms, err := backend{tc.agents[i]}.Members(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == "n3" {
				t.Errorf("n%d admitted n3 despite its wrong key: %+v", i+1, m)
			}
		}
	}
	st, err := tc.status(2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Role == api.RoleLeader || st.Members != 1 {
		t.Errorf("n3 with the wrong key: %+v, want alone and not leading", st)
	}
}

// TestAdvertisedTransportAddress: every agent listens on one port and
// advertises a forwarder in front of it, as behind a port forward or the
// benchmark's delaying proxy. Agents publish the advertised address in
// gossip, dial only that, and the election runs through the forwarders:
// with them cut, the leader loses its quorum.
func TestAdvertisedTransportAddress(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority, "")
	fwds := make([]*tcpfwd.Forwarder, len(tc.cfgs))
	for i := range tc.cfgs {
		f, err := tcpfwd.Listen()
		if err != nil {
			t.Fatal(err)
		}
		// Runs before the cluster's stopAll (cleanups run last-in
		// first-out); a second Close after the one below is harmless.
		t.Cleanup(func() { _ = f.Close() })
		fwds[i] = f
		tc.cfgs[i].Transport.Advertise = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", f.Port())
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
		listen := tc.cfgs[i].Transport.Listen
		f.Start("127.0.0.1:" + listen[strings.LastIndex(listen, "/")+1:])
	}
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)

	// Heartbeats keep flowing through the forwarders.
	bytesIn := func() uint64 {
		var n uint64
		for _, f := range fwds {
			n += f.Inbound.Load() + f.Outbound.Load()
		}
		return n
	}
	before := bytesIn()
	time.Sleep(500 * time.Millisecond)
	if after := bytesIn(); before == 0 || after <= before {
		t.Fatalf("forwarders carried %d then %d bytes: election traffic bypassed the advertised addresses", before, after)
	}
	// Every member's published libp2p address, as each agent sees it.
	for _, a := range tc.agents {
		for _, m := range a.cluster.Members() {
			want := tc.cfgs[m.ID-1].Transport.Advertise + "/p2p/"
			if !strings.HasPrefix(m.PeerAddr, want) {
				t.Errorf("%s sees %s's peer address %q, want %s…", a.cfg.Node.Name, m.Name, m.PeerAddr, want)
			}
		}
	}

	// Cut every forwarder: with no other path, the leader can no longer
	// hear a quorum and steps down (check_quorum).
	for _, f := range fwds {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var idx int
	fmt.Sscanf(first.Leader, "n%d", &idx)
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := tc.status(idx - 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Role != api.RoleLeader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still leads with every forwarder closed: election traffic has another path", first.Leader)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuorumCountsTheReplicatedVoters: an agent whose data directory holds
// the voter configuration [n1 n2 n3] while its file still says ["n1"]
// (the mismatched-lists mistake) reports a quorum of the configuration
// the protocol uses — 1 of 3, not healthy — not "1 of 1, healthy".
func TestQuorumCountsTheReplicatedVoters(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	cfg, err := protocols.NewConfiguration(1, 1, []string{"n1", "n2", "n3"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(tc.cfgs[0].Node.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(protocols.HardState{Term: 1, Config: cfg, ConfigCommitted: true}); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.eventuallyStatus(t, 10*time.Second, func(_ int, st api.Status) bool {
		return st.Quorum.Voters == 3
	})
	st, err := tc.status(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Quorum.Voters != 3 || st.Quorum.Reachable != 1 || st.Quorum.Healthy || st.Role == api.RoleLeader {
		t.Errorf("status %+v: want 1 of 3 voters reachable, not healthy, not leading", st)
	}
}
