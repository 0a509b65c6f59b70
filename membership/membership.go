package membership

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/internal/errtext"
)

// Cluster is what the agent needs from membership. *Membership and *MemNode
// implement it.
type Cluster interface {
	// Events delivers member changes; it is closed by Shutdown.
	Events() <-chan Event
	// Members returns a snapshot of every member known, this node included,
	// with its tracked state, sorted by name.
	Members() []Member
	// Leave tells the cluster this node is leaving, waiting at most timeout
	// for the news to reach a peer; 0 waits as long as gossip needs to
	// deliver it (LeaveTime).
	Leave(timeout time.Duration) error
	// Shutdown stops taking part in the cluster. Without a Leave first,
	// peers will declare this node dead.
	Shutdown() error
}

var (
	_ Cluster = (*Membership)(nil)
	_ Cluster = (*MemNode)(nil)
)

// ErrShutdown is returned by Leave after Shutdown.
var ErrShutdown = errors.New("membership: shut down")

const keyMismatchHint = "looks like a gossip key mismatch: [gossip] key must be the same on every node, or unset on every node"

const (
	defaultJoinBackoff    = 200 * time.Millisecond
	defaultJoinBackoffMax = 10 * time.Second
)

// DefaultReconnectInterval is how often a dead (not left) member is asked
// to join again when the configuration does not say.
const DefaultReconnectInterval = 2 * time.Second

// Membership is this node's membership in the cluster over memberlist. Its
// methods are safe for concurrent use.
type Membership struct {
	ml *memberlist.Memberlist
	// keyring is memberlist's (nil without keys); safe for concurrent use.
	keyring *memberlist.Keyring
	name    string
	log     *zap.Logger
	// metaMu guards meta, metaLeaving and nm, which SetDigest replaces.
	metaMu sync.RWMutex
	nm     nodeMeta
	// digestDirty and digestPushing coordinate SetDigest with pushDigest;
	// joined wakes a push waiting for the first member (kickDigest).
	digestDirty, digestPushing bool
	joined                     chan struct{}
	meta                       []byte
	// metaLeaving is meta with the leaving flag, published from Leave on.
	metaLeaving []byte
	leaving     atomic.Bool
	events      *eventQueue

	mu      sync.Mutex
	members map[string]Member
	// downSince is when each dead or left member went down.
	downSince map[string]time.Time
	// wentDown wakes the reconnect loop, idle while nobody is down, when
	// a member is added to downSince.
	wentDown chan struct{}
	// reconnectRounds counts the reconnect loop's rounds (for tests).
	reconnectRounds atomic.Int64
	reapAfter       time.Duration
	maxDown         int
	// keyRefused is when each dead member last failed to be reached
	// again for want of a shared key (KeyRefused).
	keyRefused map[string]time.Time

	// lifeMu orders Leave and Shutdown (memberlist panics on Leave after
	// Shutdown). It is never taken by callbacks, which Leave triggers.
	lifeMu   sync.Mutex
	shutdown bool
	// closing is set as Shutdown begins: memberlist's goroutines then hit
	// sockets it has closed, which zapWriter logs at debug level.
	closing atomic.Bool
	// gossipInterval and retransmitMult are memberlist's, for LeaveTime.
	gossipInterval time.Duration
	retransmitMult int

	stopJoin chan struct{}
	joinDone sync.WaitGroup
	// rejoinMu orders Rejoin's start of a join round with Shutdown's
	// wait for joins (joinDone). It is not lifeMu: a digest push or a
	// Leave holds that for up to a gossip round, and Rejoin is called
	// on the agent's event loop, which must never wait on gossip: a
	// wait there holds back every election's heartbeats.
	rejoinMu      sync.Mutex
	rejoinsClosed bool
	// lonelyNext is when a member that knows nobody may be joined next
	// (rejoin.go), by name; guarded by rejoinMu.
	lonelyNext map[string]time.Time
	// rejoining is set while a Rejoin round runs; snapshotAddrs are the
	// snapshot's addresses read at start (rejoin.go).
	rejoining     atomic.Bool
	snapshotAddrs []string

	snapshotPath  string
	snapshotDirty chan struct{}

	// broadcasts and gossiped carry Gossip messages (gossip.go).
	broadcasts *memberlist.TransmitLimitedQueue
	gossiped   chan []byte

	// q carries queries and their answers (query.go).
	q *queries
}

// Start validates cfg, starts memberlist and, when cfg.Join is not empty,
// starts joining in the background. It returns once this node listens; it
// never waits for the join (watch Events for peers arriving).
func Start(cfg Config) (*Membership, error) {
	mc, err := cfg.memberlistConfig()
	if err != nil {
		return nil, err
	}
	prios, err := EncodeElectionPriorities(cfg.ElectionPriorities)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	nm := nodeMeta{
		ID:         cfg.ID,
		Version:    ProtocolVersion,
		PeerID:     cfg.PeerID,
		PeerAddr:   cfg.PeerAddr,
		User:       cfg.UserMeta,
		Priority:   cfg.Priority,
		Priorities: prios,
		Elections:  ElectionsBitmap(cfg.Elections),
	}
	meta, err := encodeMeta(nm)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	nm.Leaving = true
	metaLeaving, err := encodeMeta(nm)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	m := &Membership{
		name:        cfg.Name,
		log:         lg,
		nm:          nm,
		joined:      make(chan struct{}, 1),
		meta:        meta,
		metaLeaving: metaLeaving,
		events:      newEventQueue(cfg.EventBuffer),
		members:     make(map[string]Member),
		downSince:   make(map[string]time.Time),
		wentDown:    make(chan struct{}, 1),
		reapAfter:   cfg.ReapAfter,
		maxDown:     cfg.MaxDown,
		stopJoin:    make(chan struct{}),

		snapshotPath:  cfg.SnapshotPath,
		snapshotDirty: make(chan struct{}, 1),
		gossiped:      make(chan []byte, gossipBuffer),
		q:             newQueries(),
	}
	if m.reapAfter <= 0 {
		m.reapAfter = DefaultReapAfter
	}
	if m.maxDown <= 0 {
		m.maxDown = DefaultMaxDown
	}
	m.broadcasts = &memberlist.TransmitLimitedQueue{NumNodes: m.liveCount, RetransmitMult: retransmitMult}
	d := &delegate{m: m}
	mc.Delegate = d
	mc.Events = d
	mc.Ping = d
	mc.Conflict = d
	mc.LogOutput = nil
	mc.Logger = newStdLogger(&zapWriter{log: lg.Named("memberlist"), onSuspect: m.suspected, closing: &m.closing})
	if cfg.tune != nil {
		cfg.tune(mc)
	}
	m.gossipInterval, m.retransmitMult = mc.GossipInterval, mc.RetransmitMult
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.events.close()
		return nil, fmt.Errorf("membership: start memberlist on %s: %w", cfg.Bind, err)
	}
	m.ml = ml
	m.keyring = mc.Keyring
	rejoin := m.rejoinAddrs(cfg.Join)
	m.snapshotAddrs = rejoin
	if len(cfg.Join) > 0 || len(rejoin) > 0 {
		backoff, maxBackoff := cfg.joinBackoff, cfg.joinBackoffMax
		if backoff <= 0 {
			backoff = defaultJoinBackoff
		}
		if maxBackoff <= 0 {
			maxBackoff = defaultJoinBackoffMax
		}
		join := append([]string(nil), cfg.Join...)
		m.joinDone.Add(1)
		go m.joinLoop(join, rejoin, backoff, maxBackoff)
	}
	if m.snapshotPath != "" {
		m.joinDone.Add(1)
		go m.runSnapshot()
	}
	interval := cfg.ReconnectInterval
	if interval <= 0 {
		interval = DefaultReconnectInterval
	}
	m.joinDone.Add(1)
	go m.reconnectLoop(interval)
	m.joinDone.Add(1)
	go m.serveQueries()
	return m, nil
}

// reconnectLoop asks one member last known as dead (not left) to join again
// every interval. Memberlist never probes a member it has declared dead, so
// after a partition heals, two sides that declared each other dead would
// stay apart for good; Serf and Consul run the same loop. A member that
// really is gone costs one failed TCP connection per interval.
//
// While no member is dead or left there is nothing to reconnect or reap,
// and the loop sleeps until one goes down instead of waking every interval
// for nothing: on an idle agent those wakes were a visible share of its
// cost (docs/benchmarks/analysis.md).
func (m *Membership) reconnectLoop(interval time.Duration) {
	defer m.joinDone.Done()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		m.mu.Lock()
		down := len(m.downSince) > 0
		m.mu.Unlock()
		if !down {
			t.Stop()
			select {
			case <-m.stopJoin:
				return
			case <-m.wentDown:
			}
			t.Reset(interval)
		}
		select {
		case <-m.stopJoin:
			return
		case <-t.C:
		}
		t.Reset(interval)
		m.reconnectRounds.Add(1)
		m.reap(time.Now())
		var dead []Member
		m.mu.Lock()
		for _, mb := range m.members {
			if mb.State == StateDead && mb.Name != m.name {
				dead = append(dead, mb)
			}
		}
		m.mu.Unlock()
		if len(dead) == 0 {
			continue
		}
		mb := dead[rand.N(len(dead))]
		if n, err := m.ml.Join([]string{mb.Addr}); n > 0 {
			m.noteKeyRefused(mb.Name, false)
			m.log.Info("reconnected to a member declared dead", zap.String("member", mb.Name), zap.String("addr", mb.Addr))
		} else {
			m.noteKeyRefused(mb.Name, err != nil && isKeyMismatch(err))
			m.log.Debug("dead member still unreachable", zap.String("member", mb.Name), zap.String("addr", mb.Addr), zap.Error(err))
		}
	}
}

// joinLoop joins through the configured addresses, retrying with jittered
// exponential backoff. It does not stop at the first success: it keeps
// trying every address until each has been reached once or belongs to a
// member this node already sees alive. Otherwise agents restarted during a
// partition would each join whoever they could reach and, once the
// partition heals, stay two separate clusters that know nothing of each
// other (the chaos harness saw exactly that after a kill-all under a split).
//
// rejoin are the addresses of the member snapshot: they are tried with the
// others until any address is reached, then dropped (members that are gone
// for good must not be retried for ever; those that are only down are the
// reconnect loop's business once gossip reports them dead).
func (m *Membership) joinLoop(addrs, rejoin []string, backoff, maxBackoff time.Duration) {
	defer m.joinDone.Done()
	pending := append(append([]string(nil), addrs...), rejoin...)
	optional := make(map[string]bool, len(rejoin))
	for _, a := range rejoin {
		optional[a] = true
	}
	for _, a := range addrs {
		delete(optional, a)
	}
	joined := false
	for attempt := 1; ; attempt++ {
		pending = m.unreached(pending)
		if len(pending) == 0 {
			return
		}
		reached, still, lastErr := m.joinEach(pending)
		pending = still
		if reached > 0 && !joined {
			joined = true
			m.log.Info("joined cluster", zap.Int("contacted", reached), zap.Int("attempts", attempt))
		}
		if joined && len(optional) > 0 {
			pending = slices.DeleteFunc(pending, func(a string) bool { return optional[a] })
		}
		if len(pending) == 0 {
			return
		}
		if lastErr == nil {
			lastErr = errors.New("no member reached")
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		fields := []zap.Field{zap.Strings("join", pending), zap.Int("attempt", attempt),
			zap.Duration("retry_in", wait), zap.Error(lastErr)}
		if msg := lastErr.Error(); strings.Contains(msg, "EOF") || strings.Contains(msg, "crypt") {
			// A peer that cannot decrypt us (or expects encryption we lack)
			// just hangs up; memberlist reports only the EOF.
			fields = append(fields, zap.String("hint", keyMismatchHint))
		}
		if joined {
			// Part of the cluster is reached; the rest may be down or on
			// the other side of a partition. Keep trying, quietly.
			m.log.Debug("join address not reached yet, retrying", fields...)
		} else {
			m.log.Warn("join failed, retrying", fields...)
		}
		select {
		case <-m.stopJoin:
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// joinParallel bounds the joins in flight at once.
const joinParallel = 8

// joinEach joins every address, up to joinParallel at a time: an address
// whose host vanished costs memberlist's TCP timeout (10 s on a LAN), and a
// restarted node must not wait out one per dead member of its snapshot
// before it reaches a live one. It returns how many answered, the others
// (in order) and the last error.
func (m *Membership) joinEach(addrs []string) (int, []string, error) {
	ok := make([]bool, len(addrs))
	errs := make([]error, len(addrs))
	sem := make(chan struct{}, joinParallel)
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := m.ml.Join([]string{addr})
			ok[i], errs[i] = n > 0, err
		}()
	}
	wg.Wait()
	reached := 0
	var still []string // fresh: logged fields keep a reference to pending
	var lastErr error
	for i, addr := range addrs {
		if ok[i] {
			reached++
			continue
		}
		still = append(still, addr)
		if errs[i] != nil {
			// memberlist's Join returns a go-multierror, whose text is a
			// multi-line list: the log line gets one sentence.
			lastErr = errtext.OneLine(errs[i])
		}
	}
	return reached, still, lastErr
}

// rejoinAddrs reads the member snapshot and returns the addresses to join
// besides join: every member's but this node's own. A snapshot that cannot
// be read is reported and ignored: it is a cache, rewritten soon.
func (m *Membership) rejoinAddrs(join []string) []string {
	if m.snapshotPath == "" {
		return nil
	}
	ms, err := ReadSnapshot(m.snapshotPath)
	if err != nil {
		m.log.Warn("ignoring the member snapshot; it is rewritten as members are seen", zap.Error(err))
		return nil
	}
	self := m.ml.LocalNode().Address()
	var out []string
	for _, mb := range ms {
		if mb.Name == m.name || mb.Addr == self || slices.Contains(join, mb.Addr) || slices.Contains(out, mb.Addr) {
			continue
		}
		out = append(out, mb.Addr)
	}
	if len(out) > 0 {
		m.log.Info("rejoining the members of the snapshot", zap.String("snapshot", m.snapshotPath), zap.Strings("addrs", out))
	}
	return out
}

// unreached drops the addresses of members this node already sees alive:
// joining them again would teach nothing.
func (m *Membership) unreached(addrs []string) []string {
	m.mu.Lock()
	alive := make(map[string]bool, len(m.members))
	for _, mb := range m.members {
		if mb.State == StateAlive || mb.State == StateSuspect {
			alive[mb.Addr] = true
		}
	}
	m.mu.Unlock()
	var out []string
	for _, a := range addrs {
		if !alive[a] {
			out = append(out, a)
		}
	}
	return out
}

// Events returns the channel of member changes. The consumer should read it
// promptly. Events are held in a buffer of Config.EventBuffer; when it
// overflows they are dropped and a single EventResync is delivered instead,
// after which Members() tells the current truth. The channel is closed by
// Shutdown.
func (m *Membership) Events() <-chan Event { return m.events.out }

// Members returns every member known, this node included, sorted by name.
// Dead and left members stay listed with their state.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedMembers(m.members)
}

func sortedMembers(ms map[string]Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, mb := range ms {
		out = append(out, mb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LocalAddr returns the address peers use to reach this node, host:port.
func (m *Membership) LocalAddr() string { return m.ml.LocalNode().Address() }

// Leave tells the cluster that this node leaves, so that peers report it
// as left rather than dead, waiting up to timeout in all. It first gossips
// metadata marked "leaving" (memberlist alone cannot tell peers' event
// delegates a leave from a failure), then memberlist's leave message. If
// the first step times out, peers may report the node as dead instead. The
// node keeps gossiping until Shutdown.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.shutdown {
		return ErrShutdown
	}
	if timeout <= 0 {
		timeout = m.LeaveTime()
	}
	deadline := time.Now().Add(timeout)
	if !m.leaving.Swap(true) {
		if err := m.ml.UpdateNode(timeout); err != nil && m.ml.NumMembers() > 1 {
			m.log.Warn("could not announce leaving; peers may report this node dead", zap.Error(err))
		}
	}
	if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil && m.ml.NumMembers() > 1 {
		// A broadcast waits for a live peer to gossip to; when the last
		// ones left while it waited, nobody is left to tell.
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// LeaveTime is how long Leave's two broadcasts take when a single peer is
// left to hear them, the slowest case: memberlist counts a broadcast as
// sent (and Leave returns) only once it went out RetransmitMult ×
// ⌈log10(n+1)⌉ times, and with one live peer that is one message per
// GossipInterval. A fixed second was too short for that case: with the
// LAN profile (200 ms, 4 ×) the second-to-last agent of three stopping
// timed out, and logged it, on every clean shutdown.
func (m *Membership) LeaveTime() time.Duration {
	n := max(m.ml.NumMembers(), len(m.Members())) // memberlist counts dead and left nodes too
	limit := m.retransmitMult * int(math.Ceil(math.Log10(float64(n+1))))
	return 2 * time.Duration(limit+2) * m.gossipInterval // +2: the rounds in progress
}

// Shutdown stops the join loop and memberlist and closes the Events
// channel. It is idempotent. If a join attempt is in flight it waits for it
// (at most memberlist's TCP timeout).
func (m *Membership) Shutdown() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.shutdown {
		return nil
	}
	m.shutdown = true
	m.closing.Store(true)
	m.rejoinMu.Lock()
	m.rejoinsClosed = true // no Rejoin adds to joinDone after this
	m.rejoinMu.Unlock()
	close(m.stopJoin)
	err := m.ml.Shutdown()
	m.joinDone.Wait()
	m.q.sends.Wait()
	m.events.close()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

// record updates the tracked member list and queues an event. It runs in
// memberlist's goroutines, under its locks: it must not block.
func (m *Membership) record(kind EventKind, n *memberlist.Node, state State) {
	meta, err := decodeMeta(n.Meta)
	if err != nil {
		m.unreadable(n, err)
		return
	}
	mb := Member{
		Name:      n.Name,
		ID:        meta.ID,
		Addr:      net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		PeerID:    meta.PeerID,
		PeerAddr:  meta.PeerAddr,
		Version:   meta.Version,
		State:     state,
		UserMeta:  meta.User,
		Digest:    meta.Digest,
		Priority:  meta.Priority,
		DigestExt: meta.DigestExt,

		ElectionPriorities: meta.Priorities,
		Elections:          meta.Elections,
	}
	m.mu.Lock()
	for _, other := range m.members {
		if other.ID == mb.ID && other.Name != mb.Name && other.State == StateAlive && state == StateAlive {
			m.log.Error("two members share one id; elections will misbehave",
				zap.Uint64("id", uint64(mb.ID)), zap.String("member", mb.Name), zap.String("other", other.Name))
		}
	}
	prev, known := m.members[mb.Name]
	m.members[mb.Name] = mb
	if state == StateDead || state == StateLeft {
		if !known || (prev.State != StateDead && prev.State != StateLeft) {
			m.downSince[mb.Name] = time.Now()
			select {
			case m.wentDown <- struct{}{}:
			default:
			}
		}
	} else {
		delete(m.downSince, mb.Name)
	}
	m.mu.Unlock()
	if !known || prev.Addr != mb.Addr || prev.State != mb.State {
		m.markSnapshot()
	}
	if kind == EventUpdate && known && prev == mb {
		// Only the leaving flag changed: nothing a consumer sees.
		return
	}
	m.events.push(Event{Kind: kind, Member: mb})
}

// reap forgets members dead or left for longer than reapAfter, and the
// longest gone beyond maxDown, with an EventReap each.
func (m *Membership) reap(now time.Time) {
	m.mu.Lock()
	var gone []Member
	for name, since := range m.downSince {
		if now.Sub(since) >= m.reapAfter {
			gone = append(gone, m.members[name])
		}
	}
	if over := len(m.downSince) - len(gone) - m.maxDown; over > 0 {
		rest := make([]string, 0, len(m.downSince))
		for name, since := range m.downSince {
			if now.Sub(since) < m.reapAfter {
				rest = append(rest, name)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return m.downSince[rest[i]].Before(m.downSince[rest[j]]) })
		for _, name := range rest[:over] {
			gone = append(gone, m.members[name])
		}
	}
	for _, mb := range gone {
		delete(m.members, mb.Name)
		delete(m.downSince, mb.Name)
		delete(m.keyRefused, mb.Name)
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		m.markSnapshot()
	}
	for _, mb := range gone {
		m.log.Info("forgetting a member gone for long", zap.String("member", mb.Name), zap.Stringer("state", mb.State))
		mb.State = StateReaped
		m.events.push(Event{Kind: EventReap, Member: mb})
	}
}

// setState moves a known member between alive and suspect; it ignores
// members in other states and unknown names.
func (m *Membership) setState(name string, from, to State, kind EventKind) {
	m.mu.Lock()
	mb, ok := m.members[name]
	if !ok || mb.State != from {
		m.mu.Unlock()
		return
	}
	mb.State = to
	m.members[name] = mb
	m.mu.Unlock()
	m.events.push(Event{Kind: kind, Member: mb})
}

func (m *Membership) suspected(name string) {
	m.setState(name, StateAlive, StateSuspect, EventSuspect)
}

// delegate receives memberlist's callbacks. Every method runs on a
// memberlist goroutine and must return quickly.
type delegate struct{ m *Membership }

// NodeMeta returns the metadata validated by Start.
func (d *delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.RLock()
	meta := d.m.meta
	if d.m.leaving.Load() {
		meta = d.m.metaLeaving
	}
	d.m.metaMu.RUnlock()
	if len(meta) > limit {
		// Start checked against MaxMetaSize; a smaller limit would be a
		// memberlist change. Publishing nothing beats its panic.
		return nil
	}
	return meta
}

func (d *delegate) NotifyMsg(b []byte) { d.m.notifyMsg(b) }
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.broadcasts.GetBroadcasts(overhead, limit)
}
func (d *delegate) LocalState(join bool) []byte            { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

func (d *delegate) NotifyJoin(n *memberlist.Node) {
	d.m.record(EventAlive, n, StateAlive)
	d.m.kickDigest()
}

func (d *delegate) NotifyLeave(n *memberlist.Node) {
	// n.State is not memberlist's view of the node (its nodeState shadows
	// the field and it is never set), so the leaving flag in the node's
	// last metadata is what tells a leave from a failure.
	if meta, err := decodeMeta(n.Meta); err == nil && meta.Leaving {
		d.m.record(EventLeft, n, StateLeft)
		return
	}
	d.m.record(EventDead, n, StateDead)
}

func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.m.record(EventUpdate, n, StateAlive) }

// AckPayload tells a prober how many members this node knows (rejoin.go).
func (d *delegate) AckPayload() []byte { return d.m.ackPayload() }

// NotifyConflict is called when a node claims a name another node at
// another address holds; memberlist keeps the first and ignores the other.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.m.log.Error("refusing a node that claims a name another node holds; give every agent its own node.name",
		zap.String("name", existing.Name), zap.String("holder_addr", existing.Address()), zap.String("claimant_addr", other.Address()))
}

// NotifyPingComplete is called when our direct probe of n was answered:
// whatever made us suspect it is over, and if n knows nobody, this node
// joins it (rejoin.go).
func (d *delegate) NotifyPingComplete(n *memberlist.Node, _ time.Duration, payload []byte) {
	d.m.setState(n.Name, StateSuspect, StateAlive, EventAlive)
	d.m.lonelyAnswer(n, payload)
}
