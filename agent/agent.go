// Package agent is the conclave daemon: one event loop that wires gossip
// membership, the libp2p transport, the phi-accrual detector, the
// configured election protocol, the durable store and the local socket API.
//
// The loop goroutine is the only place that touches election state, does the
// core's I/O and reads the clock for it. It carries out every core.Ready
// through core.Drain, in the driver contract's order, which is written
// once, on core.Ready. The agent must never report leadership it cannot
// vouch for: every answer is computed from the protocol's Status at the
// instant of asking.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/health"
	"github.com/conclave-agent/conclave/internal/netaddr"
	"github.com/conclave-agent/conclave/internal/ratelog"
	"github.com/conclave-agent/conclave/keyring"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
	"github.com/conclave-agent/conclave/transport"
)

// tickInterval is how often the loop ticks a protocol that cannot say
// when its timers are due (not a protocols.Deadliner) and checks the
// detectors: well below every timeout so timers fire within 1% of a second.
const tickInterval = 10 * time.Millisecond

// Bounds of the loop's sleep when the protocol is a protocols.Deadliner.
// maxSleep is a safety net (a deadline nobody armed still fires within
// it); minSleep keeps an overdue deadline from spinning the loop. Every
// timer the loop serves is in its wake (the cores' NextWake, owed
// snapshots, the rejoin plan's next ask), so the net is a second: at
// 250 ms it was an idle observer's most frequent wake-up.
const (
	maxSleep = time.Second
	minSleep = 200 * time.Microsecond
)

// maxBatchReceive bounds the messages the loop takes in one iteration
// besides the first: enough for a frame of every election's heartbeats
// (config.MaxElections), few enough that a flood does not starve timers
// and the socket.
const maxBatchReceive = 4 * 64

// insecureWarnEvery is how often an agent that listens beyond loopback
// without a cluster key (gossip.insecure) repeats its warning: one line at
// start scrolls away, and the state is dangerous for as long as it lasts.
// A variable so that tests can shorten it.
var insecureWarnEvery = time.Minute

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
	tr      transport.Transport
	cluster membership.Cluster
	// elections are the elections this agent runs, the default one first
	// (agent/elections.go).
	elections []*election
	gossip    membership.Gossiper // nil when the cluster does not gossip
	self      protocols.Member
	// gossipAddr and peerAddr are the addresses published to peers (empty
	// when tests replace gossip or the transport).
	gossipAddr, peerAddr string

	// Loop-owned state.
	//
	// sends collects the messages of every election's Ready, so that
	// the transport sends what goes to one peer in one frame
	// (core.Drain's Send, flushed by handleReady).
	sends []protocols.Message
	// wakes is nextWake's scratch: each election's next deadline.
	wakes []protocols.Time
	// ceilingLog limits the warnings for terms and epochs beyond the
	// ceiling: a hostile member may send them without end.
	ceilingLog *ratelog.Limiter

	requests chan func()
	loopDone chan struct{}
	killed   chan struct{}
	killOnce sync.Once

	// ring is the installed cluster keys (agent/keys.go); empty without a
	// key.
	ring atomic.Pointer[keyring.Ring]
	// ringMu serialises keyring changes: each is a save, then gossip,
	// then the transport, and two interleaved would leave them
	// disagreeing.
	ringMu sync.Mutex
	// keyq runs key steps on every member (agent/keys.go).
	keyq keyQueries

	health   *healthGlue // agent/health.go
	rejoin   rejoinGlue  // agent/rejoin.go
	hub      *localapi.Hub
	srv      *localapi.Server
	listener net.Listener
	// metricsLn is the TCP listener of [metrics] listen, nil when off.
	metricsLn net.Listener
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
		cfg:      cfg,
		log:      lg,
		start:    time.Now(),
		requests: make(chan func()),
		hub:      localapi.NewHub(watchBuffer),
		loopDone: make(chan struct{}),
		killed:   make(chan struct{}),
	}
	defer func() {
		if err != nil {
			a.closeAll()
		}
	}()
	a.self = core.ConfigFrom(cfg, core.Start{}).Election.Self

	if err := os.MkdirAll(cfg.Node.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create data directory: %w", err)
	}
	if a.lock, err = store.LockDir(cfg.Node.DataDir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	type persisted struct {
		hs       protocols.HardState
		observed uint64
	}
	var states []persisted
	for _, name := range cfg.ElectionNames() {
		e, hs, observed, err := openElection(cfg.Node.DataDir, name)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.elections = append(a.elections, e)
		states = append(states, persisted{hs, observed})
	}
	hs := states[0].hs
	key, err := clusterKey(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.loadKeyring(key); err != nil {
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
		tcfg := transportConfig(cfg)
		tcfg.Publish, tcfg.Keys, tcfg.Logger, tcfg.Self = pub.transport, a.keys(), lg.Named("transport"), a.self.ID
		host, err := transport.New(ctx, tcfg)
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
			Bind:         cfg.Gossip.Bind,
			Advertise:    gossipAdvertise,
			Join:         cfg.Gossip.Join,
			Keys:         a.ring.Load().Keys(),
			Profile:      cfg.Gossip.Profile,
			SnapshotPath: snapshotPath,
			PeerID:       peerID,
			PeerAddr:     peerAddr,
			UserMeta:     userMeta(cfg),
			Priority:     uint8(cfg.Node.Priority),

			ElectionPriorities: cfg.ElectionPriorities(),
			Elections:          cfg.ElectionNames()[1:],
			Logger:             lg.Named("gossip"),
		})
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.cluster = ml
		a.gossipAddr = ml.LocalAddr()
	}

	a.gossip, _ = a.cluster.(membership.Gossiper)
	a.serveKeyQueries()
	// One phi detector per peer, shared by every election: node-level
	// liveness, and one computation per heartbeat however many elections.
	var live *core.Liveness
	for i, e := range a.elections {
		c := a.coreConfig(e.name, states[i].hs, states[i].observed, peerAddr)
		if live == nil {
			if live, err = core.NewLiveness(c.Detector); err != nil {
				return nil, fmt.Errorf("agent: %w", err)
			}
		}
		c.Liveness = live
		if e.core, err = core.New(c); err != nil {
			return nil, fmt.Errorf("agent: election %s: %w", e.name, err)
		}
		if el, _ := cfg.ElectionFor(e.name); el.Group != "" {
			if anchor := cfg.GroupAnchor(el.Group); anchor != e.name {
				e.anchor = a.electionNamed(anchor)
			}
		}
	}
	a.serveVoterForwards()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metricsCollector{a}, healthCollector{a}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.srv, err = localapi.New(localapi.Options{
		Backend:        backend{a},
		Hub:            a.hub,
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		MaxConnections: cfg.API.MaxConnections,
		MaxWatchers:    cfg.API.MaxWatchers,
		WriteGroup:     cfg.API.WriteGroup,
		Logger:         lg.Named("api"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.Metrics.Listen != "" {
		if a.metricsLn, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			return nil, fmt.Errorf("agent: metrics.listen: %w (choose a free host:port, or \"\" to serve metrics on the socket only)", err)
		}
	}
	// The socket comes last: once it exists, local processes may ask, and
	// everything that answers them is ready.
	if a.listener, err = localapi.Listen(cfg.API.Socket, cfg.API.SocketMode.Perm()); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if core.PlantedBugs() {
		lg.Warn("this agent was built with the conclave_unsafe tag: planted election bugs are on, for the chaos checker's own test; never run it in production")
	}
	lg.Info("agent ready",
		zap.String("node", cfg.Node.Name), zap.Uint64("id", cfg.Node.ID),
		zap.String("protocol", cfg.Election.Protocol), zap.Strings("elections", cfg.ElectionNames()),
		zap.Uint64("term", hs.Term), zap.Uint64("epoch", hs.Epoch),
		zap.String("gossip_addr", a.gossipAddr), zap.String("peer_id", peerID), zap.String("peer_addr", peerAddr),
		zap.String("metrics_addr", a.MetricsAddr()))
	return a, nil
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

// coreConfig is the configuration of the core of the election called
// name: the file's, mapped by core.ConfigFor, with what this process
// knows at start.
func (a *Agent) coreConfig(name string, hs protocols.HardState, observed uint64, peerAddr string) core.Config {
	seed := uint64(time.Now().UnixNano()) ^ uint64(a.self.ID)<<32
	// Every line a core or its protocol logs names its election: an
	// agent running several says which one changed leader or lost its
	// quorum.
	lg := a.log.With(zap.String("election", name))
	c, _ := core.ConfigFor(a.cfg, name, core.Start{
		HardState:      hs,
		ObservedEpoch:  observed,
		Now:            a.now(),
		Rand:           core.NewRand(seed, uint64(os.Getpid())),
		Logger:         lg.Sugar(),
		ProtocolLogger: zapLogger{lg.Named("election").Sugar()},
		Gossip:         a.gossip != nil,
		Reachable:      a.tr.Reachable,
		GossipAddr:     a.gossipAddr,
		TransportAddr:  peerAddr,
		Maintenance:    maintenanceOnDisk(a.cfg, name),
	})
	return c
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
	if err := a.startHealth(); err != nil {
		return err
	}
	defer a.stopHealth()
	// Watchers connecting now get the state first.
	if err := a.handleReady(); err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.srv.Serve(a.listener) }()
	roErr := make(chan error, 1)
	if a.metricsLn != nil {
		go func() { roErr <- a.srv.ServeReadOnly(a.metricsLn) }()
	} else {
		roErr <- nil
	}

	wake := time.NewTimer(tickInterval)
	defer wake.Stop()
	err := a.loop(ctx, wake, serveErr)
	crashed := errors.Is(err, errKilled)
	close(a.loopDone)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if shutErr := a.srv.Shutdown(sctx); shutErr != nil {
		a.log.Warn("socket shutdown", zap.Error(shutErr))
	}
	cancel()
	if srvErr := <-serveErr; srvErr != nil && err == nil {
		err = fmt.Errorf("agent: %w", srvErr)
	}
	if srvErr := <-roErr; srvErr != nil && err == nil {
		err = fmt.Errorf("agent: %w", srvErr)
	}
	a.hub.Close()
	if crashed {
		// Like a SIGKILL: no goodbye, peers must detect the failure.
		return nil
	}
	// 0: as long as gossip needs (membership.LeaveTime); a fixed second
	// timed out whenever a single peer was left to hear the leave.
	if leaveErr := a.cluster.Leave(0); leaveErr != nil && !errors.Is(leaveErr, membership.ErrShutdown) {
		a.log.Warn("leaving gossip", zap.Error(leaveErr))
	}
	return err
}

// transportConfig is the part of the transport's configuration that comes
// from the agent's configuration file.
func transportConfig(cfg config.Config) transport.Config {
	return transport.Config{
		DataDir:         cfg.Node.DataDir,
		Listen:          cfg.Transport.Listen,
		Advertise:       cfg.Transport.Advertise,
		MaxMessageBytes: cfg.Transport.MaxMessageBytes,
		// A fifth of the interval apart: up to five idle members are each
		// probed once per interval; more stretch it, so that the agent
		// makes at most five idle probes per interval.
		IdleProbeAfter:   cfg.Transport.IdleProbeInterval.Std(),
		IdleProbeSpacing: cfg.Transport.IdleProbeInterval.Std() / 5,
	}
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

// MetricsAddr returns the host:port the metrics listener is bound to (the
// port chosen when [metrics] listen gave port 0), or "" when it is off.
func (a *Agent) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}

// SocketPath returns the path of the agent's API socket.
func (a *Agent) SocketPath() string { return a.cfg.API.Socket }

// loop is the agent's one event loop. Between inputs it sleeps on wake
// until the next timer the core has armed (core.Node.NextWake), so an idle
// agent wakes for heartbeats and due timers, not for a fixed-rate clock.
// When ctx ends it asks the core to stop (core.Node.Shutdown: a leader
// hands over first) and keeps running, membership, messages and socket
// included, until the core is done.
func (a *Agent) loop(ctx context.Context, wake *time.Timer, serveErr <-chan error) error {
	stop := ctx.Done()
	if err := a.handleReady(); err != nil {
		return err
	}
	events := a.cluster.Events()
	inbound := a.tr.Inbound()
	var insecure <-chan time.Time
	warning := a.cfg.InsecureWarning()
	if warning != "" {
		a.log.Warn(warning)
		t := time.NewTicker(insecureWarnEvery)
		defer t.Stop()
		insecure = t.C
	}
	var gossiped <-chan []byte
	if a.gossip != nil {
		gossiped = a.gossip.Gossiped()
	}
	for {
		wake.Reset(a.nextWake(a.now()))
		select {
		case <-stop:
			stop = nil
			if q, ok := a.tr.(interface{ Quiesce() }); ok {
				q.Quiesce() // peers stopping with this one are no news now
			}
			for _, e := range a.elections {
				e.core.Shutdown(a.now())
			}
			a.touchAll()
		case <-a.killed:
			return errKilled
		case <-wake.C:
			// Only the elections whose deadline came: with many, the
			// others have nothing to do, and their status nothing new.
			now := a.now()
			for i, e := range a.elections {
				if i >= len(a.wakes) || a.wakes[i] <= now {
					e.core.Tick(now)
					e.touched = true
				}
			}
			a.owedSnapshots(now, true)
		case b := <-gossiped:
			a.gossiped(b)
		case m, ok := <-inbound:
			if !ok {
				return errors.New("agent: transport closed")
			}
			a.receive(m)
			// What else has arrived goes in the same iteration: a frame
			// of several elections' heartbeats is answered in one frame.
		more:
			for range maxBatchReceive {
				select {
				case m, ok := <-inbound:
					if !ok {
						return errors.New("agent: transport closed")
					}
					a.receive(m)
				default:
					break more
				}
			}
		case ev, ok := <-events:
			if !ok {
				return errors.New("agent: membership closed")
			}
			if ev.Kind == membership.EventResync {
				members := a.cluster.Members()
				a.notePeerVersions(members...)
				for _, e := range a.elections {
					e.core.Resync(a.now(), members)
				}
			} else {
				a.notePeerVersions(ev.Member)
				for _, e := range a.elections {
					e.core.ApplyMember(a.now(), ev.Member)
				}
			}
			a.touchAll()
		case req := <-a.requests:
			req()
			a.touchAll() // a request may act on any election
		case <-insecure:
			a.log.Warn(warning)
		case <-a.healthChanged():
			a.applyHealth()
			a.touchAll()
		case err := <-serveErr:
			return fmt.Errorf("agent: socket API stopped: %w", err)
		}
		if err := a.handleReady(); err != nil {
			return err
		}
		if a.stopped() {
			return nil
		}
		a.checkRejoin()
	}
}

// nextWake is how long the loop may sleep before a core needs a Tick:
// one election's next deadline, or with several, the wake-up the core's
// timer slack picks to serve several at once (core.CoalescedWake).
func (a *Agent) nextWake(now protocols.Time) time.Duration {
	wakes := a.wakes[:0]
	for _, e := range a.elections {
		// An election no input reached since its wake was computed has
		// the same timers; a shared detector that a beat in another
		// election refreshed only moves its wake later, so the cached
		// one is at worst early (a Tick that finds nothing to do).
		if e.wakeStale || !e.wakeOK {
			e.wake, e.wakeOK = e.core.NextWake(now, maxSleep)
			e.wakeStale = false
		}
		if !e.wakeOK {
			return tickInterval
		}
		wakes = append(wakes, e.wake)
	}
	a.wakes = wakes
	next := core.CoalescedWake(wakes, core.WakeSlack(a.cfg.Detector.HeartbeatInterval.Std()))
	if owed, ok := a.owedSnapshots(now, false); ok && owed < next {
		next = owed
	}
	d := max(next.Sub(now), minSleep)
	if r := a.rejoinWake(); r < d {
		d = max(r, minSleep)
	}
	return d
}

// stopped reports whether every election's core finished stopping
// (core.Node.Stopping): a leader hands each election over first.
func (a *Agent) stopped() bool {
	for _, e := range a.elections {
		if asked, done := e.core.Stopping(); !asked || !done {
			return false
		}
	}
	return true
}

// gossiped hands a gossiped announcement to its election's core.
func (a *Agent) gossiped(b []byte) {
	name, ok := core.ElectionOf(b)
	e := a.electionNamed(name)
	if !ok || e == nil {
		a.log.Debug("ignoring gossiped message: not an announcement of an election this agent runs", zap.String("election", name))
		return
	}
	e.touched = true
	if err := e.core.Gossiped(a.now(), b); err != nil {
		a.log.Debug("ignoring gossiped message", zap.String("election", name), zap.Error(err))
	}
}

func (a *Agent) closeAll() {
	if a.listener != nil && a.srv == nil {
		_ = a.listener.Close()
	}
	if a.metricsLn != nil {
		// Already closed when it was served; closed here when New failed
		// after opening it or Run never served it.
		_ = a.metricsLn.Close()
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

// handleReady carries out every election's pending Ready batches through
// core.Drain, in the driver contract's order (core.Ready), with the agent
// as the shell, and then sends what they produced: the messages of every
// election to one peer leave together, in one frame. A failed persist
// stops the agent.
func (a *Agent) handleReady() error {
	a.followGroups()
	for _, e := range a.elections {
		if !e.touched {
			continue // no input since its last Drain: nothing is pending
		}
		if err := core.Drain(e.core, &electionShell{a: a, e: e}); err != nil {
			// Sending now could break a promise a vote made, and
			// publishing could report an epoch a restart takes back:
			// stop.
			a.sends = a.sends[:0]
			return fmt.Errorf("agent: election %s: %w", e.name, err)
		}
	}
	if len(a.sends) > 0 {
		a.sendAll(a.sends)
		clear(a.sends)
		a.sends = a.sends[:0]
	}
	a.storeSnapshots()
	return nil
}

// electionShell is the agent as core.Drain's shell for one election: its
// store, the transport, gossip and the socket.
type electionShell struct {
	a *Agent
	e *election
}

func (s *electionShell) Persist(hs *protocols.HardState, observed uint64) error {
	if hs != nil {
		if err := s.e.store.Save(*hs); err != nil {
			return fmt.Errorf("persist election state: %w", err)
		}
	}
	if observed != 0 {
		if err := s.e.store.SaveObserved(observed); err != nil {
			return fmt.Errorf("persist observed epoch: %w", err)
		}
	}
	return nil
}

// Send collects msgs; handleReady sends every election's at once.
func (s *electionShell) Send(msgs []protocols.Message) {
	s.a.sends = append(s.a.sends, msgs...)
}

func (s *electionShell) ApplyPeers(peers []core.PeerChange) {
	a := s.a
	for _, p := range peers {
		if p.Remove {
			delete(s.e.probes, p.ID)
			if !a.memberOfAny(p.ID) {
				a.tr.RemovePeer(p.ID)
			}
			continue
		}
		s.e.probes[p.ID] = p.Probe
		a.tr.SetProbed(p.ID, a.probed(p.ID))
		if err := a.tr.SetPeer(p.ID, p.PeerID, p.PeerAddr); err != nil {
			a.log.Warn("cannot admit member", zap.String("member", p.Name), zap.Error(err))
		}
	}
}

func (s *electionShell) Gossip(anns []core.Announcement) {
	for _, ann := range anns {
		s.a.gossipAnnouncement(ann)
	}
}

// PublishDigest publishes the default election's settings digest; gossip
// metadata has room for one, and named elections hand out none.
func (s *electionShell) PublishDigest(digest, ext string) {
	if dg, ok := s.a.cluster.(membership.Digester); ok {
		if err := dg.SetDigest(digest, ext); err != nil {
			s.a.log.Warn("cannot publish the settings digest", zap.Error(err))
		}
	}
}

func (s *electionShell) Publish(st api.Status) {
	a := s.a
	s.e.snapDue = true
	if s.e != a.def() {
		a.publishNamed(s.e, st)
		return
	}
	a.rejoin.last, a.rejoin.hasLast = st, true
	a.hub.Publish(a.withCutOff(st))
}

// FireHooks runs the [[hook]] commands of this election's transitions.
func (s *electionShell) FireHooks(t core.Transition) {
	if s.a.health == nil {
		return
	}
	if h := s.a.health.hooks[s.e.name]; h != nil {
		h.Fire(health.Transition(t))
	}
}

func (s *electionShell) Settle(cs []core.Confirmation, vs []core.VoterResult, ends []core.SessionEnd) {
	for _, end := range ends {
		s.e.endSession(end)
	}
	for _, c := range cs {
		s.e.settleConfirm(c)
	}
	for _, v := range vs {
		s.e.settleVoters(v)
	}
}

// memberOfAny reports whether some election still wants a transport peer
// for member id.
func (a *Agent) memberOfAny(id protocols.ID) bool {
	for _, e := range a.elections {
		if _, ok := e.probes[id]; ok {
			return true
		}
	}
	return false
}

// receive feeds a peer's message to its election's core.
func (a *Agent) receive(m protocols.Message) {
	e, ok := a.receiveFor(m)
	if !ok {
		a.log.Debug("message of an election this agent does not run", zap.Stringer("msg", m))
		return
	}
	e.touched = true
	err := e.core.Step(a.now(), m)
	switch {
	case err == nil:
	case errors.Is(err, protocols.ErrBeyondCeiling):
		a.warnBeyondCeiling(m, err)
	default:
		a.log.Debug("message refused", zap.Stringer("msg", m), zap.Error(err))
	}
}

// gossipAnnouncement gossips a leader announcement; each transmission
// carries its age at the moment it leaves.
func (a *Agent) gossipAnnouncement(ann core.Announcement) {
	if a.gossip == nil {
		return
	}
	held := time.Now()
	a.gossip.Gossip(ann.Election, func() []byte {
		c := ann
		c.Age += time.Since(held)
		return c.Append(nil)
	})
}
