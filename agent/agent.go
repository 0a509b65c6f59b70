// Package agent is the conclave daemon: one event loop that wires gossip
// membership, the libp2p transport, the phi-accrual detector, the
// configured election protocol, the durable store and the local socket API.
//
// The loop goroutine is the only place that touches election state, does the
// protocol's I/O and reads the clock for it. For every Ready it persists the
// HardState (fsync), then sends the messages, then announces the change,
// then advances — never in another order. The agent must never report
// leadership it cannot vouch for: every answer is computed from the
// protocol's Status at the instant of asking.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/netaddr"
	"github.com/conclave-agent/conclave/internal/ratelog"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/store"
	"github.com/conclave-agent/conclave/transport"
)

// tickInterval is how often the loop ticks a protocol that cannot say
// when its timers are due (not a protocols.Deadliner) and checks the
// detectors: well below every timeout so timers fire within 1% of a second.
const tickInterval = 10 * time.Millisecond

// Bounds of the loop's sleep when the protocol is a protocols.Deadliner.
// maxSleep is a safety net (a deadline nobody armed still fires within
// it); minSleep keeps an overdue deadline from spinning the loop.
const (
	maxSleep = 250 * time.Millisecond
	minSleep = 200 * time.Microsecond
)

// maxClockDrift is the clock-rate drift the majority lease tolerates. NTP
// keeps real clocks within a few hundred ppm; 1% is a wide margin.
const maxClockDrift = 0.01

// handoverTimeout bounds how long a resigning leader waits on shutdown for
// its successor before it leaves anyway.
const handoverTimeout = 2 * time.Second

// watchBuffer is how many changes a watcher may lag behind before it is
// closed; leadership changes are rare, so 64 is generous.
const watchBuffer = 64

// Options are the parts of an agent that tests and `agent dev` replace.
type Options struct {
	// Logger receives the agent's logs; nil discards them.
	Logger *zap.Logger
	// Transport, when set, replaces the libp2p host (tests).
	Transport transport.Transport
	// Cluster, when set, replaces memberlist (tests). PeerID/PeerAddr of
	// the local node are then the caller's business.
	Cluster membership.Cluster
}

// Agent is one running conclave daemon.
type Agent struct {
	cfg   config.Config
	log   *zap.Logger
	start time.Time

	lock    *store.DirLock
	store   *store.Store
	tr      transport.Transport
	cluster membership.Cluster
	proto   protocols.Protocol
	self    protocols.Member
	// gossipAddr and peerAddr are the addresses published to peers (empty
	// when tests replace gossip or the transport).
	gossipAddr, peerAddr string

	// snapshot is the loop's latest status, read by socket requests
	// without a trip through the loop.
	snapshot atomic.Pointer[statusSnapshot]

	// Loop-owned state.
	members   map[string]membership.Member
	byID      map[protocols.ID]string
	detectors map[protocols.ID]*phi.Detector
	suspected map[protocols.ID]bool
	// suspectAt caches each detector's SuspectAt until its next heartbeat.
	suspectAt map[protocols.ID]protocols.Time
	// refused holds live members refused for claiming an id another
	// member holds, by name; they are admitted once the id is free.
	refused  map[string]membership.Member
	lastView view
	viewSeq  uint64 // views published so far: api.Status.Seq
	confirms []*confirmWait
	voters   voterTrack // replicated voter set seen by the fast path (voters.go)
	stats    loopStats
	obs      observers
	// ceilingLog limits the warnings for terms and epochs beyond the
	// ceiling: a hostile member may send them without end.
	ceilingLog *ratelog.Limiter

	requests chan func()
	loopDone chan struct{}
	killed   chan struct{}
	killOnce sync.Once

	hub      *localapi.Hub
	srv      *localapi.Server
	listener net.Listener
}

// loopStats are the loop's counters, read by /metrics through the loop.
type loopStats struct {
	leaderChanges    uint64
	electionsStarted uint64
	electionsWon     uint64
	sent             map[protocols.MessageKind]uint64
	received         map[protocols.MessageKind]uint64
	stepErrors       uint64
	beyondCeiling    uint64 // messages refused by the term/epoch ceiling
}

// New builds an agent from a validated configuration: it locks the data
// directory, restores the persisted state, starts the transport and joins
// gossip. Nothing runs until Run.
func New(ctx context.Context, cfg config.Config, opts Options) (_ *Agent, err error) {
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	a := &Agent{
		cfg:       cfg,
		log:       lg,
		start:     time.Now(),
		members:   make(map[string]membership.Member),
		byID:      make(map[protocols.ID]string),
		detectors: make(map[protocols.ID]*phi.Detector),
		suspected: make(map[protocols.ID]bool),
		suspectAt: make(map[protocols.ID]protocols.Time),
		refused:   make(map[string]membership.Member),
		requests:  make(chan func()),
		hub:       localapi.NewHub(watchBuffer),
		loopDone:  make(chan struct{}),
		killed:    make(chan struct{}),
		self: protocols.Member{
			ID:    protocols.ID(cfg.Node.ID),
			Name:  cfg.Node.Name,
			Voter: isVoter(cfg),
		},
	}
	a.stats.sent = make(map[protocols.MessageKind]uint64)
	a.stats.received = make(map[protocols.MessageKind]uint64)
	defer func() {
		if err != nil {
			a.closeAll()
		}
	}()

	if err := os.MkdirAll(cfg.Node.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create data directory: %w", err)
	}
	if a.lock, err = store.LockDir(cfg.Node.DataDir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.store, err = store.Open(cfg.Node.DataDir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	hs, err := a.store.Load()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	key, err := clusterKey(cfg)
	if err != nil {
		return nil, err
	}

	// The members this agent knew before a restart are joined along with
	// gossip.join, and the route to them tells which address to publish.
	snapshotPath := filepath.Join(cfg.Node.DataDir, membership.SnapshotFile)
	peers := append([]string(nil), cfg.Gossip.Join...)
	if known, err := membership.ReadSnapshot(snapshotPath); err == nil {
		for _, m := range known {
			if m.Name != cfg.Node.Name {
				peers = append(peers, m.Addr)
			}
		}
	}
	pub, err := publishAddrs(netaddr.System, cfg, peers)
	if err != nil {
		return nil, err
	}
	if pub.gossipAdvertise != "" {
		lg.Info("gossip binds every address; publishing one", zap.String("gossip.bind", cfg.Gossip.Bind),
			zap.String("published", pub.gossipAdvertise), zap.String("chosen_as", pub.gossipReason))
	}
	if pub.transport.IsValid() {
		lg.Info("transport listens on every address; publishing one", zap.String("transport.listen", cfg.Transport.Listen),
			zap.Stringer("published", pub.transport), zap.String("chosen_as", pub.transportReason))
	}

	a.tr = opts.Transport
	peerID, peerAddr := "", ""
	if a.tr == nil {
		host, err := transport.New(ctx, transport.Config{
			DataDir:         cfg.Node.DataDir,
			Listen:          cfg.Transport.Listen,
			Advertise:       cfg.Transport.Advertise,
			Publish:         pub.transport,
			ClusterKey:      key,
			MaxMessageBytes: cfg.Transport.MaxMessageBytes,
			Logger:          lg.Named("transport"),
			Self:            a.self.ID,
		})
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.tr = host
		peerID = host.PeerID()
		if addrs := host.Addrs(); len(addrs) > 0 {
			peerAddr = addrs[0]
		}
	}

	gossipAdvertise := cfg.Gossip.Advertise
	if gossipAdvertise == "" {
		gossipAdvertise = pub.gossipAdvertise
	}
	a.peerAddr = peerAddr
	a.cluster = opts.Cluster
	if a.cluster == nil {
		ml, err := membership.Start(membership.Config{
			Name:         cfg.Node.Name,
			ID:           a.self.ID,
			Voter:        a.self.Voter,
			Bind:         cfg.Gossip.Bind,
			Advertise:    gossipAdvertise,
			Join:         cfg.Gossip.Join,
			Key:          key,
			Profile:      cfg.Gossip.Profile,
			SnapshotPath: snapshotPath,
			PeerID:       peerID,
			PeerAddr:     peerAddr,
			Logger:       lg.Named("gossip"),
		})
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.cluster = ml
		a.gossipAddr = ml.LocalAddr()
	}

	if a.proto, err = newProtocol(cfg, a.self, hs, a.now(), lg.Named("election")); err != nil {
		return nil, err
	}
	a.initObservers()
	a.serveVoterForwards()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metricsCollector{a}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.srv, err = localapi.New(localapi.Options{
		Backend:        backend{a},
		Hub:            a.hub,
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		MaxConnections: cfg.API.MaxConnections,
		MaxWatchers:    cfg.API.MaxWatchers,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	// The socket comes last: once it exists, local processes may ask, and
	// everything that answers them is ready.
	if a.listener, err = localapi.Listen(cfg.API.Socket, cfg.API.SocketMode.Perm()); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	lg.Info("agent ready",
		zap.String("node", cfg.Node.Name), zap.Uint64("id", cfg.Node.ID),
		zap.String("protocol", cfg.Election.Protocol),
		zap.Uint64("term", hs.Term), zap.Uint64("epoch", hs.Epoch),
		zap.String("gossip_addr", a.gossipAddr), zap.String("peer_id", peerID), zap.String("peer_addr", peerAddr))
	return a, nil
}

func isVoter(cfg config.Config) bool {
	return cfg.Election.Protocol != config.ProtocolMajority || slices.Contains(cfg.Election.Voters, cfg.Node.Name)
}

func clusterKey(cfg config.Config) ([]byte, error) {
	if cfg.Gossip.Key == "" {
		return nil, nil
	}
	key, err := membership.ParseKey(cfg.Gossip.Key)
	if err != nil {
		return nil, fmt.Errorf("agent: gossip.key: %w", err)
	}
	return key, nil
}

// newProtocol builds the configured election.
func newProtocol(cfg config.Config, self protocols.Member, hs protocols.HardState, now protocols.Time, lg *zap.Logger) (protocols.Protocol, error) {
	seed := uint64(time.Now().UnixNano()) ^ uint64(self.ID)<<32
	rng := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	plog := zapLogger{lg.Sugar()}
	members := []protocols.Member{self}
	et := cfg.Election.ElectionTimeout.Std()
	hb := cfg.Detector.HeartbeatInterval.Std()
	var (
		p   protocols.Protocol
		err error
	)
	switch cfg.Election.Protocol {
	case config.ProtocolMajority:
		p, err = majority.New(majority.Config{
			ID: self.ID, Members: members, Voters: cfg.Election.Voters,
			ElectionTimeout: et, HeartbeatInterval: hb,
			PreVote: cfg.Election.PreVote, CheckQuorum: cfg.Election.CheckQuorum,
			MaxClockDrift: maxClockDrift, HardState: hs, Now: now, Rand: rng, Logger: plog,
		})
	case config.ProtocolBully:
		p, err = bully.New(bully.Config{
			ID: self.ID, Members: members, ElectionTimeout: et, HeartbeatInterval: hb,
			NoPreempt: !cfg.Election.Preempt, HardState: hs, Now: now, Rand: rng, Logger: plog,
		})
	case config.ProtocolRing:
		p, err = ring.New(ring.Config{
			ID: self.ID, Members: members, ElectionTimeout: et, HeartbeatInterval: hb,
			Algorithm: cfg.Election.RingAlgorithm, HardState: hs, Now: now, Rand: rng, Logger: plog,
		})
	default:
		err = fmt.Errorf("unknown protocol %q", cfg.Election.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: election: %w", err)
	}
	return p, nil
}

// zapLogger adapts zap to protocols.Logger.
type zapLogger struct{ s *zap.SugaredLogger }

func (l zapLogger) Debugw(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
func (l zapLogger) Infow(msg string, kv ...any)  { l.s.Infow(msg, kv...) }

// now reads the monotonic clock as the protocol's local time.
func (a *Agent) now() protocols.Time { return protocols.Time(time.Since(a.start)) }

// Run drives the agent until ctx is cancelled, then hands leadership over,
// leaves gossip and releases everything. It returns nil after a clean
// shutdown and an error when the agent had to stop (a failed fsync).
func (a *Agent) Run(ctx context.Context) error {
	defer a.closeAll()
	a.publish() // watchers connecting now get the state first
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve(a.listener) }()

	wake := time.NewTimer(tickInterval)
	defer wake.Stop()
	err := a.loop(ctx, wake, serveErr)
	crashed := errors.Is(err, errKilled)
	if err == nil {
		ticker := time.NewTicker(tickInterval)
		a.handover(ticker.C)
		ticker.Stop()
	}
	close(a.loopDone)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if shutErr := a.srv.Shutdown(sctx); shutErr != nil {
		a.log.Warn("socket shutdown", zap.Error(shutErr))
	}
	cancel()
	if srvErr := <-serveErr; srvErr != nil && err == nil {
		err = fmt.Errorf("agent: %w", srvErr)
	}
	a.hub.Close()
	if crashed {
		// Like a SIGKILL: no goodbye, peers must detect the failure.
		return nil
	}
	if leaveErr := a.cluster.Leave(time.Second); leaveErr != nil && !errors.Is(leaveErr, membership.ErrShutdown) {
		a.log.Warn("leaving gossip", zap.Error(leaveErr))
	}
	return err
}

// errKilled ends the loop of an agent stopped with Kill.
var errKilled = errors.New("agent: killed")

// Kill stops the agent as abruptly as an in-process stop can: no leadership
// handover, no gossip leave. `agent dev` and tests use it to imitate a
// crash; Run returns nil.
func (a *Agent) Kill() { a.killOnce.Do(func() { close(a.killed) }) }

// Subscribe returns a watch on this agent's status: the current one first,
// then every change (see localapi.Hub).
func (a *Agent) Subscribe() *localapi.Subscription { return a.hub.Subscribe() }

// SocketPath returns the path of the agent's API socket.
func (a *Agent) SocketPath() string { return a.cfg.API.Socket }

// loop is the agent's one event loop. Between inputs it sleeps on wake
// until the next timer anything has armed (see nextWake), so an idle agent
// wakes for heartbeats and due timers, not for a fixed-rate clock.
func (a *Agent) loop(ctx context.Context, wake *time.Timer, serveErr <-chan error) error {
	if err := a.handleReady(); err != nil {
		return err
	}
	events := a.cluster.Events()
	inbound := a.tr.Inbound()
	gossiped := a.gossiped()
	for {
		wake.Reset(a.nextWake(a.now()))
		select {
		case <-ctx.Done():
			return nil
		case <-a.killed:
			return errKilled
		case <-wake.C:
			now := a.now()
			a.proto.Tick(now)
			a.checkDetectors(now)
		case b := <-gossiped:
			a.learn(b)
		case m, ok := <-inbound:
			if !ok {
				return errors.New("agent: transport closed")
			}
			a.receive(m)
		case ev, ok := <-events:
			if !ok {
				return errors.New("agent: membership closed")
			}
			a.membershipEvent(ev)
		case req := <-a.requests:
			req()
		case err := <-serveErr:
			return fmt.Errorf("agent: socket API stopped: %w", err)
		}
		if err := a.handleReady(); err != nil {
			return err
		}
	}
}

// handover asks a leader to transfer leadership and keeps the loop running
// until it no longer leads or handoverTimeout passes.
func (a *Agent) handover(tick <-chan time.Time) {
	if a.proto.Status(a.now()).Role != protocols.Leader {
		return
	}
	if err := a.proto.Resign(a.now()); err != nil {
		// A clean shutdown logs no error field: the usual reason here
		// (a single voter, or no other voter reachable) is not a fault.
		if errors.Is(err, protocols.ErrNoTransferTarget) {
			a.log.Info("stopping as leader: no other voter is reachable to hand leadership to")
		} else {
			a.log.Warn("no leadership transfer on shutdown", zap.Error(err))
		}
		return
	}
	a.log.Info("handing leadership over before shutdown")
	deadline := time.After(handoverTimeout)
	inbound := a.tr.Inbound()
	for {
		if err := a.handleReady(); err != nil {
			a.log.Warn("during handover", zap.Error(err))
			return
		}
		st := a.proto.Status(a.now())
		if st.Leader != a.self.ID && st.Leader != protocols.None {
			return
		}
		select {
		case <-deadline:
			a.log.Warn("leadership handover timed out")
			return
		case <-tick:
			a.proto.Tick(a.now())
		case m, ok := <-inbound:
			if !ok {
				return
			}
			a.receive(m)
		}
	}
}

func (a *Agent) closeAll() {
	if a.listener != nil && a.srv == nil {
		_ = a.listener.Close()
	}
	if a.cluster != nil {
		if err := a.cluster.Shutdown(); err != nil {
			a.log.Warn("gossip shutdown", zap.Error(err))
		}
	}
	if a.tr != nil {
		if err := a.tr.Close(); err != nil {
			a.log.Warn("transport close", zap.Error(err))
		}
	}
	if a.lock != nil {
		if err := a.lock.Unlock(); err != nil {
			a.log.Warn("data directory unlock", zap.Error(err))
		}
	}
}

// handleReady applies the driver contract: persist, send, announce, advance.
func (a *Agent) handleReady() error {
	for a.proto.HasReady() {
		rd := a.proto.Ready()
		if rd.HardState != nil {
			if err := a.store.Save(*rd.HardState); err != nil {
				// Sending now could break a promise a vote made; stop.
				return fmt.Errorf("agent: persist election state: %w", err)
			}
		}
		for _, m := range rd.Messages {
			if !a.fastPath(m) {
				continue
			}
			a.stats.sent[m.Kind]++
			a.tr.Send(m.To, m)
		}
		if ss := rd.SoftState; ss != nil {
			a.log.Debug("soft state", zap.Stringer("role", ss.Role), zap.Uint64("leader", uint64(ss.Leader)), zap.Uint64("epoch", ss.Epoch))
		}
		a.proto.Advance(rd)
	}
	a.checkDigest()
	a.publish()
	a.announce(a.now())
	a.checkConfirms()
	a.storeSnapshot()
	return nil
}

// receive feeds a peer's message to the detector and the protocol.
func (a *Agent) receive(m protocols.Message) {
	now := a.now()
	if _, known := a.byID[m.From]; !known {
		a.stats.stepErrors++
		a.log.Debug("message from a node gossip has not introduced", zap.Uint64("from", uint64(m.From)), zap.Stringer("kind", m.Kind))
		return
	}
	if a.settingsConflict(m.From) {
		a.stats.stepErrors++
		return
	}
	a.stats.received[m.Kind]++
	if m.Kind == protocols.MsgHeartbeat || m.Kind == protocols.MsgHeartbeatResp {
		a.heard(now, m.From)
	}
	if err := a.proto.Step(now, m); err != nil {
		a.stats.stepErrors++
		if errors.Is(err, protocols.ErrBeyondCeiling) {
			a.refusedBeyondCeiling(m, err)
			return
		}
		a.log.Debug("message refused", zap.Stringer("msg", m), zap.Error(err))
	}
}

// membershipEvent turns gossip changes into transport peers and protocol
// membership input.
func (a *Agent) membershipEvent(ev membership.Event) {
	if ev.Kind == membership.EventResync {
		for _, m := range a.cluster.Members() {
			a.applyMember(m)
		}
		return
	}
	a.applyMember(ev.Member)
}

func (a *Agent) applyMember(m membership.Member) {
	if m.Name == a.self.Name {
		return
	}
	now := a.now()
	prev, known := a.members[m.Name]
	if m.State == membership.StateReaped {
		a.forgetMember(now, prev, known)
		a.admitRefused(now, prev.ID)
		return
	}
	a.members[m.Name] = m
	if known && a.byID[prev.ID] == m.Name && (prev.ID != m.ID || prev.PeerID != m.PeerID) {
		// Back with another id or another libp2p identity: the old one
		// is gone for good. Without this its transport peer kept the
		// peer id, the new id was refused as taken, and the member was
		// shut out until every other agent restarted.
		a.log.Info("member changed identity", zap.String("member", m.Name),
			zap.Uint64("old_id", uint64(prev.ID)), zap.Uint64("id", uint64(m.ID)),
			zap.String("old_peer_id", prev.PeerID), zap.String("peer_id", m.PeerID))
		a.dropID(now, prev.ID)
		a.admitRefused(now, prev.ID)
		known = false
	}
	switch m.State {
	case membership.StateAlive, membership.StateSuspect:
		if m.ID == protocols.None {
			return
		}
		if a.refuseDuplicate(m) {
			return
		}
		delete(a.refused, m.Name)
		a.byID[m.ID] = m.Name
		if m.PeerID != "" && (!known || prev.PeerID != m.PeerID || prev.PeerAddr != m.PeerAddr || prev.State != m.State) {
			if err := a.tr.SetPeer(m.ID, m.PeerID, m.PeerAddr); err != nil {
				a.log.Warn("cannot admit member", zap.String("member", m.Name), zap.Error(err))
			}
		}
		if !known || prev.State == membership.StateDead || prev.State == membership.StateLeft {
			a.log.Info("member up", zap.String("member", m.Name), zap.Uint64("id", uint64(m.ID)))
			a.proto.MemberUp(now, m.ProtocolMember())
		}
	case membership.StateDead, membership.StateLeft:
		if _, refused := a.refused[m.Name]; refused {
			delete(a.refused, m.Name)
			return
		}
		if a.byID[m.ID] != m.Name {
			return
		}
		a.log.Info("member down", zap.String("member", m.Name), zap.Stringer("state", m.State))
		a.memberDown(now, m.ID, m.Name)
		a.forgetDetector(now, m.ID)
		if m.State == membership.StateLeft {
			// It said goodbye: stop its sender and refuse its streams.
			// A dead member keeps its peer, since it may be only
			// partitioned away; it is removed when gossip reaps it.
			a.tr.RemovePeer(m.ID)
		}
		a.admitRefused(now, m.ID)
	}
}

// refuseDuplicate refuses m, loudly, when another live member (or this
// agent) already holds its id: two agents with one id make every protocol
// misbehave (an observer was reported leader, the real holder of the id
// was cut off), so the one that came second stays out until the first is
// gone. Every agent logs the refusal once per conflict.
func (a *Agent) refuseDuplicate(m membership.Member) bool {
	holder, holderAddr := "", ""
	switch owner, ok := a.byID[m.ID]; {
	case m.ID == a.self.ID:
		holder, holderAddr = a.self.Name+" (this agent)", a.gossipAddr
	case ok && owner != m.Name:
		if o, live := a.members[owner]; live && (o.State == membership.StateAlive || o.State == membership.StateSuspect) {
			holder, holderAddr = owner, o.Addr
		}
	}
	if holder == "" {
		return false
	}
	if prev, logged := a.refused[m.Name]; !logged || prev.ID != m.ID || prev.Addr != m.Addr {
		a.log.Error("refusing a member that claims an id another agent holds; give every agent its own node.id",
			zap.Uint64("id", uint64(m.ID)),
			zap.String("member", m.Name), zap.String("member_addr", m.Addr),
			zap.String("holder", holder), zap.String("holder_addr", holderAddr))
	}
	a.refused[m.Name] = m
	return true
}

// admitRefused admits a member refused for claiming id, now that id is
// free.
func (a *Agent) admitRefused(now protocols.Time, id protocols.ID) {
	for name, r := range a.refused {
		if r.ID != id {
			continue
		}
		delete(a.refused, name)
		if m, ok := a.members[name]; ok && m.ID == id {
			a.log.Info("admitting a member refused before: the id it claims is free now", zap.String("member", name), zap.Uint64("id", uint64(id)))
			a.applyMember(m)
		}
		return
	}
}

// dropID forgets everything kept under a member id that no longer exists:
// its transport peer (sender goroutine, queue, connections), detector and
// suspicion, and tells the protocol it is gone.
func (a *Agent) dropID(now protocols.Time, id protocols.ID) {
	if id == protocols.None {
		return
	}
	name := a.byID[id]
	delete(a.byID, id)
	a.tr.RemovePeer(id)
	a.memberDown(now, id, name)
	a.forgetDetector(now, id)
}

// forgetMember drops a member gossip has reaped (dead or left long enough
// ago): nothing of it stays, so churn cannot grow the agent's state.
func (a *Agent) forgetMember(now protocols.Time, prev membership.Member, known bool) {
	if !known {
		return
	}
	delete(a.members, prev.Name)
	delete(a.refused, prev.Name)
	if a.byID[prev.ID] == prev.Name {
		a.dropID(now, prev.ID)
	}
}
