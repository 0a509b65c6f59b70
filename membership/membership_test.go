package membership

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/leakcheck"
	"github.com/conclave-agent/conclave/internal/loopback"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain fails the package if goroutines outlive the tests, patiently:
// memberlist's Shutdown does not wait for its per-connection handlers.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// waitLimit bounds every wait so a broken build fails instead of hanging.
// It is a deadline for failure, not a timing the test asserts.
const waitLimit = 30 * time.Second

// fast shrinks memberlist's timings so failures are detected in about a
// second on loopback.
func fast(mc *memberlist.Config) {
	mc.ProbeInterval = 100 * time.Millisecond
	mc.ProbeTimeout = 50 * time.Millisecond
	mc.GossipInterval = 20 * time.Millisecond
	mc.PushPullInterval = 500 * time.Millisecond
	mc.TCPTimeout = 500 * time.Millisecond
	mc.SuspicionMult = 2
	mc.GossipToTheDeadTime = 2 * time.Second
}

type node struct {
	*Membership
	logs *observer.ObservedLogs
	w    *watcher
}

func testConfig(name string, id protocols.ID, join ...string) Config {
	return Config{
		Name: name,
		ID:   id,

		Bind:           "127.0.0.1:0",
		Join:           join,
		Profile:        ProfileLocal,
		PeerID:         "12D3KooW" + name,
		PeerAddr:       "/ip4/127.0.0.1/tcp/" + name,
		ReclaimTime:    500 * time.Millisecond,
		tune:           fast,
		joinBackoff:    50 * time.Millisecond,
		joinBackoffMax: 200 * time.Millisecond,
	}
}

func start(t *testing.T, cfg Config) *node {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	cfg.Logger = zap.New(core)
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Name, err)
	}
	n := &node{Membership: m, logs: logs, w: watch(m)}
	t.Cleanup(func() { m.Shutdown() })
	return n
}

// watcher drains a node's events into its own view of the cluster, the way
// the agent would, and lets tests wait for a condition on that view.
type watcher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	view   map[string]Member
	kinds  map[string][]EventKind
	closed bool
}

func watch(c Cluster) *watcher {
	w := &watcher{view: make(map[string]Member), kinds: make(map[string][]EventKind)}
	w.cond = sync.NewCond(&w.mu)
	go func() {
		for ev := range c.Events() {
			w.mu.Lock()
			if ev.Kind == EventResync {
				for _, mb := range c.Members() {
					w.view[mb.Name] = mb
				}
			} else {
				w.view[ev.Member.Name] = ev.Member
				w.kinds[ev.Member.Name] = append(w.kinds[ev.Member.Name], ev.Kind)
			}
			w.cond.Broadcast()
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.closed = true
		w.cond.Broadcast()
		w.mu.Unlock()
	}()
	return w
}

// until waits until pred holds over the watcher's view.
func (w *watcher) until(t *testing.T, what string, pred func(view map[string]Member) bool) {
	t.Helper()
	timer := time.AfterFunc(waitLimit, func() {
		w.mu.Lock()
		w.closed = true
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for !pred(w.view) {
		if w.closed {
			t.Fatalf("gave up waiting for %s; view: %+v", what, w.view)
		}
		w.cond.Wait()
	}
}

func (w *watcher) eventKinds(name string) []EventKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]EventKind(nil), w.kinds[name]...)
}

// waitLog waits until a log line matching pred was recorded. Observed logs
// offer no notification, so this polls; the poll interval is not asserted.
func waitLog(t *testing.T, logs *observer.ObservedLogs, what string, pred func(observer.LoggedEntry) bool) observer.LoggedEntry {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, e := range logs.All() {
			if pred(e) {
				return e
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line: %s", what)
	return observer.LoggedEntry{}
}

func wantMember(n *node, cfg Config) Member {
	return Member{
		Name: cfg.Name, ID: cfg.ID, Addr: n.LocalAddr(),
		PeerID: cfg.PeerID, PeerAddr: cfg.PeerAddr, Version: ProtocolVersion, State: StateAlive,
		Elections: ElectionsBitmap(cfg.Elections),
	}
}

func TestThreeNodesJoinFromSeed(t *testing.T) {
	began := time.Now()
	c1 := testConfig("n1", 1)
	n1 := start(t, c1)
	c2 := testConfig("n2", 2, n1.LocalAddr())
	c3 := testConfig("n3", 3, n1.LocalAddr())
	n2, n3 := start(t, c2), start(t, c3)
	want := []Member{wantMember(n1, c1), wantMember(n2, c2), wantMember(n3, c3)}
	for _, n := range []*node{n1, n2, n3} {
		n.w.until(t, "all three alive with their metadata", func(view map[string]Member) bool {
			for _, mb := range want {
				if view[mb.Name] != mb {
					return false
				}
			}
			return true
		})
		got := n.Members()
		if len(got) != 3 {
			t.Fatalf("Members() = %+v, want 3", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("Members()[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
	t.Logf("3 nodes converged in %v", time.Since(began))
}

func TestDeadAndLeft(t *testing.T) {
	n1 := start(t, testConfig("n1", 1))
	n2 := start(t, testConfig("n2", 2, n1.LocalAddr()))
	n3 := start(t, testConfig("n3", 3, n1.LocalAddr()))
	allAlive := func(view map[string]Member) bool {
		return len(view) == 3 && isAlive(view, "n1") && isAlive(view, "n2") && isAlive(view, "n3")
	}
	n1.w.until(t, "n1 sees all alive", allAlive)
	n2.w.until(t, "n2 sees all alive", allAlive)

	// n3 crashes: no leave.
	if err := n3.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{n1, n2} {
		n.w.until(t, "n3 dead", func(view map[string]Member) bool { return view["n3"].State == StateDead })
	}
	kinds := n1.w.eventKinds("n3")
	if kinds[len(kinds)-1] != EventDead {
		t.Errorf("n1's last event about n3: %v, want dead", kinds[len(kinds)-1])
	}

	// n2 leaves gracefully.
	if err := n2.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("n1 events about n2: %v", n1.w.eventKinds("n2"))
			for _, e := range n1.logs.All() {
				if strings.Contains(e.Message, "n2") {
					t.Logf("n1 log: %v %s", e.Level, e.Message)
				}
			}
		}
	}()
	n1.w.until(t, "n2 left", func(view map[string]Member) bool { return view["n2"].State == StateLeft })
	kinds = n1.w.eventKinds("n2")
	if kinds[len(kinds)-1] != EventLeft {
		t.Errorf("n1's last event about n2: %v, want left", kinds[len(kinds)-1])
	}
	var states []string
	for _, mb := range n1.Members() {
		states = append(states, mb.Name+"="+mb.State.String())
	}
	if got := strings.Join(states, " "); got != "n1=alive n2=left n3=dead" {
		t.Errorf("n1 Members: %s", got)
	}
	if err := n2.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown: %v, want ErrShutdown", err)
	}
}

func TestWrongKeyCannotJoin(t *testing.T) {
	keyA, keyB := make([]byte, 32), make([]byte, 32)
	keyB[0] = 1
	c1 := testConfig("n1", 1)
	c1.Key = keyA
	n1 := start(t, c1)
	c2 := testConfig("n2", 2, n1.LocalAddr())
	c2.Key = keyB
	n2 := start(t, c2)

	// The seed cannot decrypt the joiner and says so.
	e := waitLog(t, n1.logs, "seed reports undecryptable traffic", func(e observer.LoggedEntry) bool {
		return strings.Contains(e.Message, "no installed keys could decrypt the message")
	})
	t.Logf("seed logged: %s", e.Message)
	// The joiner keeps retrying and logs why each attempt failed.
	e = waitLog(t, n2.logs, "second failed join attempt", func(e observer.LoggedEntry) bool {
		return e.Message == "join failed, retrying" && e.ContextMap()["attempt"] == int64(2)
	})
	t.Logf("joiner logged: %s %q", e.Message, e.ContextMap()["error"])
	if e.ContextMap()["hint"] != keyMismatchHint {
		t.Errorf("joiner's log does not point at the key: %v", e.ContextMap())
	}
	for _, n := range []*node{n1, n2} {
		if ms := n.Members(); len(ms) != 1 {
			t.Errorf("%v sees %+v; nodes with different keys must not join", n.LocalAddr(), ms)
		}
	}

	// A joiner with the right key gets in.
	c3 := testConfig("n3", 3, n1.LocalAddr())
	c3.Key = keyA
	n3 := start(t, c3)
	n3.w.until(t, "n3 joins with the right key", func(view map[string]Member) bool {
		return isAlive(view, "n1") && isAlive(view, "n3")
	})
}

func TestKeyedNodeRejectsPlaintext(t *testing.T) {
	c1 := testConfig("n1", 1)
	c1.Key = make([]byte, 16)
	n1 := start(t, c1)
	n2 := start(t, testConfig("n2", 2, n1.LocalAddr()))
	e := waitLog(t, n2.logs, "plaintext joiner fails", func(e observer.LoggedEntry) bool {
		return e.Message == "join failed, retrying"
	})
	if e.ContextMap()["hint"] != keyMismatchHint {
		t.Errorf("joiner's log does not point at the key: %v", e.ContextMap())
	}
	waitLog(t, n1.logs, "seed refuses plaintext", func(e observer.LoggedEntry) bool {
		return strings.Contains(e.Message, "not encrypted")
	})
}

func TestMetaTooLargeIsAnError(t *testing.T) {
	cfg := testConfig("n1", 1)
	cfg.PeerAddr = "/dns4/" + strings.Repeat("a", 600) + "/tcp/1"
	m, err := Start(cfg)
	if err == nil {
		m.Shutdown()
		t.Fatal("Start with 600-byte metadata succeeded")
	}
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("Start: %v, want ErrMetaTooLarge", err)
	}
	if !strings.Contains(err.Error(), "512") {
		t.Errorf("error %q does not state the limit", err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestJoinRetriesUntilSeedStarts(t *testing.T) {
	seedAddr := freePort(t)
	n2 := start(t, testConfig("n2", 2, seedAddr))
	// Start returned without waiting; the join fails in the background.
	waitLog(t, n2.logs, "a failed join attempt", func(e observer.LoggedEntry) bool {
		return e.Message == "join failed, retrying"
	})
	c1 := testConfig("n1", 1)
	c1.Bind = seedAddr
	n1 := start(t, c1)
	both := func(view map[string]Member) bool {
		return isAlive(view, "n1") && isAlive(view, "n2")
	}
	n1.w.until(t, "seed sees the retrying joiner", both)
	n2.w.until(t, "joiner sees the seed", both)
	waitLog(t, n2.logs, "joined", func(e observer.LoggedEntry) bool { return e.Message == "joined cluster" })
}

func TestShutdownStopsJoinLoop(t *testing.T) {
	n := start(t, testConfig("n1", 1, freePort(t)))
	waitLog(t, n.logs, "a failed join attempt", func(e observer.LoggedEntry) bool {
		return e.Message == "join failed, retrying"
	})
	// goleak in TestMain fails the package if the loop outlives Shutdown.
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestRestartOnNewPortAfterReclaim(t *testing.T) {
	n1 := start(t, testConfig("n1", 1))
	c2 := testConfig("n2", 2, n1.LocalAddr())
	n2 := start(t, c2)
	n1.w.until(t, "n2 alive", func(view map[string]Member) bool { return isAlive(view, "n2") })
	oldAddr := n2.LocalAddr()
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n1.w.until(t, "n2 dead", func(view map[string]Member) bool { return view["n2"].State == StateDead })

	// Same name, new port (port 0 picks another).
	again := start(t, c2)
	if again.LocalAddr() == oldAddr {
		t.Skipf("the kernel handed out the old port %s again", oldAddr)
	}
	n1.w.until(t, "n2 alive at its new address", func(view map[string]Member) bool {
		return isAlive(view, "n2") && view["n2"].Addr == again.LocalAddr()
	})
}

func TestConfigErrors(t *testing.T) {
	base := testConfig("n1", 1)
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no name":        {func(c *Config) { c.Name = "" }, "name is empty"},
		"zero id":        {func(c *Config) { c.ID = 0 }, "id must not be 0"},
		"no bind":        {func(c *Config) { c.Bind = "" }, "bind address is empty"},
		"bad bind":       {func(c *Config) { c.Bind = "127.0.0.1" }, "bind address"},
		"bad port":       {func(c *Config) { c.Bind = "127.0.0.1:70000" }, "bad port"},
		"advertise name": {func(c *Config) { c.Advertise = "example.com:1" }, "must be an IP"},
		"profile":        {func(c *Config) { c.Profile = "fast" }, `unknown gossip profile "fast"`},
		"key length":     {func(c *Config) { c.Key = make([]byte, 10) }, "decodes to 10 bytes"},
	} {
		cfg := base
		tc.mutate(&cfg)
		m, err := Start(cfg)
		if err == nil {
			m.Shutdown()
			t.Errorf("%s: Start succeeded", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not contain %q", name, err, tc.want)
		}
	}
}

func TestNoStderrFromMemberlist(t *testing.T) {
	// Memberlist's own lines reach zap at their levels: DEBUG lines exist
	// in a normal join, and none is logged above its level.
	n1 := start(t, testConfig("n1", 1))
	n2 := start(t, testConfig("n2", 2, n1.LocalAddr()))
	n2.w.until(t, "join", func(view map[string]Member) bool { return isAlive(view, "n1") })
	e := waitLog(t, n2.logs, "memberlist debug line", func(e observer.LoggedEntry) bool {
		return e.LoggerName == "memberlist" && strings.HasPrefix(e.Message, "Initiating push/pull sync")
	})
	if e.Level != zap.DebugLevel {
		t.Errorf("push/pull line at level %v, want debug", e.Level)
	}
	for _, e := range n2.logs.All() {
		if strings.HasPrefix(e.Message, "[") || strings.HasPrefix(e.Message, "memberlist:") {
			t.Errorf("prefix not stripped: %q", e.Message)
		}
	}
}

// A member declared dead is asked to join again: here b restarts on its
// old address with no join list, so only a's reconnect loop can bring the
// two together again (as after a partition in which both sides declared
// the other dead).
func TestDeadMemberIsReconnected(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconnect=%v", reconnect), func(t *testing.T) {
			acfg := testConfig("a", 1)
			acfg.ReconnectInterval = 100 * time.Millisecond
			if !reconnect {
				acfg.ReconnectInterval = time.Hour
			}
			a := start(t, acfg)
			b := start(t, testConfig("b", 2, a.LocalAddr()))
			a.w.until(t, "a sees b alive", func(v map[string]Member) bool { return isAlive(v, "b") })
			addr := b.LocalAddr()
			if err := b.Shutdown(); err != nil {
				t.Fatal(err)
			}
			a.w.until(t, "a declares b dead", func(v map[string]Member) bool { return v["b"].State == StateDead })
			// Past GossipToTheDeadTime (2 s in fast), a no longer gossips to
			// b at all: only the reconnect loop reaches out.
			time.Sleep(2500 * time.Millisecond)
			bcfg := testConfig("b", 2)
			bcfg.Bind = addr
			bcfg.ReconnectInterval = time.Hour
			b2 := start(t, bcfg)
			if reconnect {
				a.w.until(t, "a sees b alive again", func(v map[string]Member) bool { return isAlive(v, "b") })
				b2.w.until(t, "b sees a alive", func(v map[string]Member) bool { return isAlive(v, "a") })
				return
			}
			// The control: without the loop, nobody reaches out.
			time.Sleep(2 * time.Second)
			for _, mb := range a.Members() {
				if mb.Name == "b" && mb.State == StateAlive {
					t.Fatalf("b came back without a reconnect loop: the test cannot tell the loop works")
				}
			}
		})
	}
}

// The reconnect loop sleeps while nobody is dead or left, and starts its
// rounds once a member goes down. It used to wake every interval on every
// idle agent to find nothing to do.
func TestReconnectLoopSleepsWhileNobodyIsDown(t *testing.T) {
	acfg := testConfig("a", 1)
	acfg.ReconnectInterval = 10 * time.Millisecond
	a := start(t, acfg)
	b := start(t, testConfig("b", 2, a.LocalAddr()))
	a.w.until(t, "a sees b alive", func(v map[string]Member) bool { return isAlive(v, "b") })
	time.Sleep(300 * time.Millisecond) // thirty intervals
	if n := a.reconnectRounds.Load(); n != 0 {
		t.Fatalf("the reconnect loop ran %d rounds with nobody down; want none", n)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	a.w.until(t, "a declares b dead", func(v map[string]Member) bool { return v["b"].State == StateDead })
	deadline := time.Now().Add(5 * time.Second)
	for a.reconnectRounds.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reconnect loop ran no round within 5 s of b going down")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A node keeps trying every join address until each has been reached once,
// not just the first: here n3 reaches n1 at once while n2 is not up yet;
// n2 later starts alone (no join list, as after a restart on the other side
// of a partition) and is found only because n3 keeps trying it.
func TestJoinKeepsTryingUnreachedSeeds(t *testing.T) {
	n1 := start(t, testConfig("n1", 1))
	n2Addr := freePort(t)
	n3 := start(t, testConfig("n3", 3, n1.LocalAddr(), n2Addr))
	// "joined cluster" is logged after the first pass over the list, which
	// tried n2's address while nothing listened there.
	waitLog(t, n3.logs, "n3's first join pass", func(e observer.LoggedEntry) bool { return e.Message == "joined cluster" })
	c2 := testConfig("n2", 2)
	c2.Bind = n2Addr
	n2 := start(t, c2)

	n2.w.until(t, "n2, which joined nobody, sees n1 and n3", func(v map[string]Member) bool {
		return isAlive(v, "n1") && isAlive(v, "n3")
	})
}

// isAlive reports whether the view holds name as alive. StateAlive is the
// zero State, so a missing entry must not count.
func isAlive(v map[string]Member, name string) bool {
	m, ok := v[name]
	return ok && m.State == StateAlive
}

// Rejoin is called on the agent's event loop, so it must return at once
// even while a digest push or a Leave holds lifeMu for a gossip round:
// waiting there held back every election's heartbeats.
func TestRejoinDoesNotWaitOnGossip(t *testing.T) {
	n := start(t, testConfig("a", 1))
	dead := freePort(t) // nothing listens there
	n.lifeMu.Lock()     // what pushDigest holds around UpdateNode
	returned := make(chan struct{})
	go func() {
		n.Rejoin([]string{dead})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		n.lifeMu.Unlock()
		<-returned
		t.Fatal("Rejoin waited for lifeMu, held by a digest push: the agent's loop would stall")
	}
	n.lifeMu.Unlock()
	waitLog(t, n.logs, "the rejoin round ran", func(e observer.LoggedEntry) bool {
		return e.Message == "rejoin: no address answered"
	})
}

// A member that comes back knowing nobody (a wiped data directory, no
// join list) on the address the others still list alive is joined by
// them within about a probe interval, not at memberlist's next push-pull:
// its acks say it knows only itself.
func TestLonelyRestartIsJoined(t *testing.T) {
	// Neither push-pull nor the reconnect loop may find it here: only
	// the acks can.
	slow := func(mc *memberlist.Config) {
		fast(mc)
		mc.PushPullInterval = time.Hour
	}
	ca := testConfig("a", 1)
	ca.tune, ca.ReconnectInterval = slow, time.Hour
	a := start(t, ca)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cb := testConfig("b", 2, a.LocalAddr())
	cb.tune, cb.ReconnectInterval = slow, time.Hour
	cb.Bind = fmt.Sprintf("127.0.0.1:%d", port)
	b := start(t, cb)
	a.w.until(t, "b alive", func(v map[string]Member) bool { return isAlive(v, "b") })
	// Until the join's news has been gossiped its retransmits, gossip
	// alone would tell the restarted b of a; a settled cluster has none.
	time.Sleep(time.Second)

	// b comes back at once, before a could suspect it, knowing nobody
	// and under a new peer id (a wiped agent makes a new key).
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cb.Join, cb.PeerID = nil, "12D3KooWb-wiped"
	b2 := start(t, cb)
	b2.w.until(t, "the restarted b knows a", func(v map[string]Member) bool { return isAlive(v, "a") })
	a.w.until(t, "a has b's new peer id", func(v map[string]Member) bool {
		return isAlive(v, "b") && v["b"].PeerID == cb.PeerID
	})
	waitLog(t, a.logs, "a says it joined the member that knew nobody", func(e observer.LoggedEntry) bool {
		return strings.HasPrefix(e.Message, "joined a member that knew nobody")
	})
}

// TestKeyRefusedNamesAMemberBackWithAnotherKey: a member that comes back
// on its address holding only a key the others no longer have cannot
// join, and gossip alone reports it dead; the reconnect loop's failed
// attempts name it for want of a key, and it drops out once it is back
// with the right key.
func TestKeyRefusedNamesAMemberBackWithAnotherKey(t *testing.T) {
	keyA, keyB := make([]byte, 32), make([]byte, 32)
	keyB[0] = 1
	n2Addr := freePort(t)
	c1 := testConfig("n1", 1)
	c1.Key, c1.ReconnectInterval = keyA, 100*time.Millisecond
	n1 := start(t, c1)
	c2 := testConfig("n2", 2, n1.LocalAddr())
	c2.Key, c2.Bind = keyA, n2Addr
	n2 := start(t, c2)
	n1.w.until(t, "n2 joins", func(view map[string]Member) bool { return isAlive(view, "n2") })
	if got := n1.KeyRefused(time.Minute); len(got) != 0 {
		t.Fatalf("KeyRefused with every key shared: %v", got)
	}
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n1.w.until(t, "n2 dead", func(view map[string]Member) bool { return view["n2"].State == StateDead })

	waitRefused := func(what string, want []string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := n1.KeyRefused(time.Minute)
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: KeyRefused %v, want %v", what, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c2.Key, c2.Join = keyB, nil
	n2 = start(t, c2)
	waitRefused("n2 back with only another key", []string{"n2"})
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	c2.Key, c2.Join = keyA, []string{n1.LocalAddr()}
	start(t, c2)
	waitRefused("n2 back with the shared key", nil)
}
