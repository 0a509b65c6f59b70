package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
)

// maxWrite bounds how many queued messages the sender gathers for one
// stream write; it takes units whole, so a write may carry one unit more.
const maxWrite = MaxBatch

// Host is the libp2p Transport: TCP, Noise, yamux, and with cluster keys
// the admission handshake. It is safe for concurrent use.
type Host struct {
	cfg     Config
	log     *zap.Logger
	h       host.Host
	stats   *counters
	inbound chan protocols.Message
	ctx     context.Context // cancelled by Close; aborts dials
	cancel  context.CancelFunc

	// stopping is set by Quiesce, when this node begins to shut down.
	stopping atomic.Bool
	// removed holds when each peer RemovePeer forgot went (at most
	// maxRemembered, each for rememberRemoved): a member that left
	// cleanly may still dial while it shuts down, which is no news.
	removed map[peer.ID]time.Time
	// admit runs the admission handshake; nil without a cluster key.
	admit *admission
	// admitRefused holds when each member last failed admission.
	admitRefused map[protocols.ID]time.Time

	mu     sync.RWMutex
	closed bool
	peers  map[protocols.ID]*peerState
	byPeer map[peer.ID]protocols.ID
	// unprobed are the members SetProbed took out of probing, by id
	// whether admitted or not: the choice outlives an address change.
	unprobed map[protocols.ID]bool
	streams  map[network.Stream]struct{} // inbound streams being read
	wg       sync.WaitGroup              // senders and inbound readers

	// idleAfterNow is the prober's current slow speed (a Duration), for
	// Reachable.
	idleAfterNow atomic.Int64
	// probeKick wakes the prober before its planned wake: a member may be
	// due sooner than it planned for (it was admitted, turned fast, or a
	// probe of it ended). nextIdleProbe is when the prober may start its
	// next probe of an idle member (UnixNano; guarded by mu), so that
	// idle members' probes spread over the slow period.
	probeKick     chan struct{}
	nextIdleProbe int64

	closeOnce sync.Once
	closeErr  error
}

// peerState is one admitted member. Its sender goroutine owns the outbound
// stream; stop ends it when the member is removed or changes address.
type peerState struct {
	id   protocols.ID
	pid  peer.ID
	addr ma.Multiaddr
	// queue holds units (a Send, or SendAll's messages for this member),
	// queued the messages in them (DefaultQueueLen has the rule).
	queue  chan []protocols.Message
	queued atomic.Int64
	stop   chan struct{}
	// kick cuts a backoff short: the member was heard from again.
	kick chan struct{}
	// heard is when the member was last heard from (UnixNano): a
	// message, a probe, an answer to ours. Admission counts as heard, so
	// a new member is not unreachable before it had a chance to speak.
	heard atomic.Int64
	// sent is when a message for the member was last queued (UnixNano, 0
	// for never) and fastSince when sending last began after a pause of
	// IdleProbeAfter: they choose the probe speed (probe.go).
	sent, fastSince atomic.Int64
	// failed is set when a probe failed and cleared when the member is
	// heard again.
	failed atomic.Bool
	// answered is set by the first probe that succeeds, spoke whenever
	// the member is heard (probeTimes).
	answered, spoke atomic.Bool
	// lastProbe is when the prober last started a probe of it (UnixNano),
	// fails how many probes failed since it was last heard.
	lastProbe atomic.Int64
	fails     atomic.Int32
	// probeStream is the member's long-lived probe stream, kept between
	// probes (probe.go: takeProbeStream, keepProbeStream).
	probeMu     sync.Mutex
	probeStream network.Stream
	// probes counts probes started toward the member, probeStreams the
	// streams they opened.
	probeStreams atomic.Uint64
	probes       atomic.Uint64
	// probing is true while a probe is in flight (guarded by Host.mu).
	probing bool
	// probed: the prober keeps this member's reachability known
	// (SetProbed; guarded by Host.mu).
	probed bool
	// senderOnce starts the member's sender at the first message queued
	// for it: an observer sends nothing to the other observers, and a
	// sender goroutine per member made its goroutines grow with the
	// fleet.
	senderOnce sync.Once
}

func newPeerState(id protocols.ID, pid peer.ID, addr ma.Multiaddr, queueLen int) *peerState {
	ps := &peerState{id: id, pid: pid, addr: addr,
		queue: make(chan []protocols.Message, queueLen), stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	ps.heard.Store(time.Now().UnixNano())
	return ps
}

// New starts a libp2p host listening on cfg.Listen with the identity kept
// in cfg.DataDir (created on first start). No peer is admitted until
// SetPeer names it. ctx bounds only the start-up.
func New(ctx context.Context, cfg Config) (*Host, error) {
	cfg.setDefaults()
	if cfg.Listen == "" {
		return nil, errors.New("transport: listen address is not set")
	}
	if cfg.Self == protocols.None {
		return nil, errors.New("transport: Self (this node's member id) is not set")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	var advertise ma.Multiaddr
	if cfg.Advertise != "" {
		a, err := ma.NewMultiaddr(cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("transport: advertise address %q: %w", cfg.Advertise, err)
		}
		if _, err := a.ValueForProtocol(ma.P_TCP); err != nil {
			return nil, fmt.Errorf("transport: advertise address %q has no TCP port", cfg.Advertise)
		}
		if _, id := peer.SplitAddr(a); id != "" {
			return nil, fmt.Errorf("transport: advertise address %q must not name a peer id (this node's own is added)", cfg.Advertise)
		}
		advertise = a
	}
	key, created, err := loadOrCreateIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	SetLibp2pLogger(cfg.Logger)
	hctx, cancel := context.WithCancel(context.Background())
	t := &Host{
		cfg:       cfg,
		log:       cfg.Logger.Named("transport"),
		stats:     newCounters(),
		inbound:   make(chan protocols.Message, cfg.InboundLen),
		ctx:       hctx,
		cancel:    cancel,
		peers:     map[protocols.ID]*peerState{},
		byPeer:    map[peer.ID]protocols.ID{},
		unprobed:  map[protocols.ID]bool{},
		probeKick: make(chan struct{}, 1),
		streams:   map[network.Stream]struct{}{},
	}
	listen, err := ma.NewMultiaddr(cfg.Listen)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("transport: listen address %q: %w", cfg.Listen, err)
	}
	// Without reuseport, two members that dial each other at once
	// get two connections. With it both dial from their listen
	// ports, TCP merges the two attempts into one simultaneous open,
	// both sides act as initiator and the Noise handshake fails
	// (seen as "noise: message is too short"), losing the first
	// messages of an election. Reuseport only helps NAT traversal,
	// which we do not use. Relay, ping and metrics stay off: the
	// host is built from its parts (libp2p.go).
	parts := hostParts{key: key, listen: listen, gater: gater{t}}
	if advertise != nil {
		// Only the advertised address: a listen address behind the NAT
		// or the proxy would let peers bypass it, or dial a private
		// address they cannot reach.
		parts.addrs = func([]ma.Multiaddr) []ma.Multiaddr {
			return []ma.Multiaddr{advertise}
		}
	} else if cfg.Publish.IsValid() {
		publish := cfg.Publish.Unmap()
		parts.addrs = func(in []ma.Multiaddr) []ma.Multiaddr {
			return publishOnly(in, publish)
		}
	}
	keys := cfg.Keys
	if keys == nil && len(cfg.ClusterKey) > 0 {
		one := [][]byte{cfg.ClusterKey}
		keys = func() [][]byte { return one }
	}
	if keys != nil && len(keys()) > 0 {
		parts.admit = &admission{
			keys: func() [][]byte {
				ks := keys()
				out := make([][]byte, len(ks))
				for i, k := range ks {
					out[i] = AdmitKey(k)
				}
				return out
			},
			timeout: cfg.DialTimeout,
			refused: t.refusedAdmission,
			pnet:    newPnetCompat(keys, func() { admitFailures.Add(1) }),
		}
	} else {
		t.log.Warn("no cluster key: election traffic is authenticated by peer id only, not limited to holders of a cluster key")
	}
	t.admit = parts.admit
	h, err := newLibp2pHost(parts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("transport: start libp2p on %q: %w", cfg.Listen, err)
	}
	t.h = h
	h.SetStreamHandler(protocol.ID(ProtocolID), t.handleStream)
	if !cfg.onlyV1 {
		h.SetStreamHandler(protocol.ID(BatchProtocolID), t.handleStream)
	}
	h.SetStreamHandler(protocol.ID(ProbeProtocolID), t.handleProbe)
	h.SetStreamHandler(protocol.ID(ProbeStreamProtocolID), t.handleProbeStream)
	// A member that connects to us is back: its sender may be waiting
	// out a long backoff from when it was unreachable. Only inbound
	// connections: our own dials succeeding would wake the sender that
	// made them, and a kick left over from one would cut its next backoff
	// short, spinning on a peer that accepts connections and then fails.
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.Stat().Direction != network.DirInbound {
			return
		}
		t.mu.RLock()
		ps := t.peers[t.byPeer[c.RemotePeer()]]
		t.mu.RUnlock()
		if ps != nil {
			ps.wake()
		}
	}})
	t.idleAfterNow.Store(int64(t.cfg.IdleProbeAfter))
	t.wg.Add(1)
	go t.runProber()
	t.log.Info("transport started", zap.String("peer_id", h.ID().String()),
		zap.Stringers("listen", h.Network().ListenAddresses()),
		zap.Strings("addrs", t.Addrs()), zap.Bool("new_identity", created),
		zap.Bool("admission", parts.admit != nil))
	return t, nil
}

// publishOnly keeps the addresses on ip. Should the interface have lost
// that address, it keeps every address but loopback, and loopback only when
// nothing else is left: publishing nothing would make the node unreachable
// for certain, publishing loopback would make peers dial themselves.
func publishOnly(in []ma.Multiaddr, ip netip.Addr) []ma.Multiaddr {
	var on, other []ma.Multiaddr
	for _, a := range in {
		na, err := manet.ToNetAddr(a)
		if err != nil {
			continue
		}
		tcp, ok := na.(*net.TCPAddr)
		if !ok {
			continue
		}
		aip, ok := netip.AddrFromSlice(tcp.IP)
		if !ok {
			continue
		}
		switch aip = aip.Unmap(); {
		case aip == ip:
			on = append(on, a)
		case !aip.IsLoopback() && !aip.IsUnspecified():
			other = append(other, a)
		}
	}
	switch {
	case len(on) > 0:
		return on
	case len(other) > 0:
		return other
	default:
		return in
	}
}

// PeerID returns this node's libp2p peer id, stable across restarts.
func (t *Host) PeerID() string { return t.h.ID().String() }

// Addrs returns the full multiaddrs (with /p2p/<peer id>) to advertise:
// Config.Advertise when set, else the addresses listened on.
func (t *Host) Addrs() []string {
	full, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: t.h.ID(), Addrs: t.h.Addrs()})
	if err != nil {
		return nil
	}
	out := make([]string, len(full))
	for i, a := range full {
		out[i] = a.String()
	}
	return out
}

// Inbound implements Transport. Every message on it came from an admitted
// member over its own authenticated connection, with From equal to that
// member's ID and To equal to Self or None.
func (t *Host) Inbound() <-chan protocols.Message { return t.inbound }

// Stats implements Transport.
func (t *Host) Stats() Stats { return t.stats.snapshot() }

// SetPeer implements Transport. addr is the member's transport multiaddr,
// optionally ending in /p2p/<peerID>. Changing a member's peer id or
// address restarts its sender; messages still queued for it are dropped
// (uncounted: they were never attempted).
func (t *Host) SetPeer(id protocols.ID, peerID string, addr string) error {
	if id == protocols.None || id == t.cfg.Self {
		return fmt.Errorf("transport: set peer: invalid member id %d", id)
	}
	pid, err := peer.Decode(peerID)
	if err != nil {
		return fmt.Errorf("transport: set peer %d: peer id %q: %w", id, peerID, err)
	}
	full, err := ma.NewMultiaddr(addr)
	if err != nil {
		return fmt.Errorf("transport: set peer %d: address %q: %w", id, addr, err)
	}
	maddr, addrPID := peer.SplitAddr(full)
	if addrPID != "" && addrPID != pid {
		return fmt.Errorf("transport: set peer %d: address %q names peer %s, not %s", id, addr, addrPID, pid)
	}
	if maddr == nil {
		return fmt.Errorf("transport: set peer %d: address %q has no transport part", id, addr)
	}
	if pid == t.h.ID() {
		return fmt.Errorf("transport: set peer %d: peer id %s is this node's own", id, pid)
	}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errors.New("transport: set peer: host is closed")
	}
	if other, ok := t.byPeer[pid]; ok && other != id {
		t.mu.Unlock()
		return fmt.Errorf("transport: set peer %d: peer id %s already belongs to member %d", id, pid, other)
	}
	old := t.peers[id]
	if old != nil && old.pid == pid && old.addr.Equal(maddr) {
		t.mu.Unlock()
		return nil
	}
	if old != nil {
		close(old.stop)
		delete(t.byPeer, old.pid)
		t.h.Peerstore().ClearAddrs(old.pid)
	}
	t.h.Peerstore().ClearAddrs(pid)
	t.h.Peerstore().AddAddr(pid, maddr, peerstore.PermanentAddrTTL)
	ps := newPeerState(id, pid, maddr, t.cfg.QueueLen)
	ps.probed = !t.unprobed[id]
	t.peers[id] = ps
	t.byPeer[pid] = id
	t.mu.Unlock()
	t.kickProber() // a new member is probed at the fast speed

	if old != nil {
		// Outside t.mu: a reset writes to the connection.
		old.keepProbeStream(nil)
	}
	if old != nil && old.pid != pid {
		// The old identity is no longer a member: cut what it has open.
		_ = t.h.Network().ClosePeer(old.pid)
	}
	t.log.Debug("peer admitted", zap.Uint64("member", uint64(id)), zap.Stringer("peer", pid), zap.Stringer("addr", maddr))
	return nil
}

// SetProbed implements Transport. A member out of probing costs this node
// nothing while it stays silent: no probe, no stream and no connection of
// this node's making. An observer needs probes only toward the voters;
// an observer probing every other observer made a fleet of N agents hold
// N² connections (docs/benchmarks/analysis.md, Fleet).
func (t *Host) SetProbed(id protocols.ID, probed bool) {
	t.mu.Lock()
	if probed {
		delete(t.unprobed, id)
	} else {
		t.unprobed[id] = true
	}
	ps := t.peers[id]
	if ps != nil {
		ps.probed = probed
	}
	t.mu.Unlock()
	if ps != nil && !probed {
		// Its long-lived probe stream, if any, is not needed any more.
		ps.keepProbeStream(nil)
	}
	if ps != nil && probed {
		t.kickProber()
	}
}

// RemovePeer implements Transport. Its queued messages are discarded and
// its connections closed; a later stream from it is refused.
func (t *Host) RemovePeer(id protocols.ID) {
	t.mu.Lock()
	ps := t.peers[id]
	if ps == nil || t.closed {
		t.mu.Unlock()
		return
	}
	delete(t.peers, id)
	delete(t.byPeer, ps.pid)
	delete(t.unprobed, id) // the next SetPeer of id comes with its own choice
	t.rememberRemoved(ps.pid, time.Now())
	close(ps.stop)
	t.h.Peerstore().ClearAddrs(ps.pid)
	t.mu.Unlock()
	_ = t.h.Network().ClosePeer(ps.pid)
	t.log.Debug("peer removed", zap.Uint64("member", uint64(id)), zap.Stringer("peer", ps.pid))
}

// Send implements Transport. It only enqueues: the peer's sender goroutine
// does the network work, so a slow or dead peer never stalls the caller.
// m.From should be Self and m.To should be to; receivers drop anything else.
func (t *Host) Send(to protocols.ID, m protocols.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	t.enqueue(to, []protocols.Message{m})
}

// SendAll implements Transport. Each member's messages become one unit of
// its queue, which its sender writes at once.
func (t *Host) SendAll(msgs []protocols.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, g := range groupByTo(msgs) {
		t.enqueue(g[0].To, g)
	}
}

// groupByTo splits msgs into one slice per To, in order of first
// appearance, each keeping its messages' order. The groups share one fresh
// backing array (each capped at its own length), so a round of many
// elections costs two allocations, not a growing slice per peer.
func groupByTo(msgs []protocols.Message) [][]protocols.Message {
	if len(msgs) == 0 {
		return nil
	}
	type group struct {
		to protocols.ID
		n  int
	}
	var groups []group
	// An iteration addresses a few peers: a linear search beats a map
	// until there are many.
	var byTo map[protocols.ID]int
	find := func(to protocols.ID) int {
		if byTo != nil {
			if i, ok := byTo[to]; ok {
				return i
			}
			return -1
		}
		for i, g := range groups {
			if g.to == to {
				return i
			}
		}
		return -1
	}
	which := make([]int, len(msgs))
	for j, m := range msgs {
		i := find(m.To)
		if i < 0 {
			i = len(groups)
			groups = append(groups, group{to: m.To})
			if byTo != nil {
				byTo[m.To] = i
			} else if len(groups) > 16 {
				byTo = make(map[protocols.ID]int, 2*len(groups))
				for k, g := range groups {
					byTo[g.to] = k
				}
			}
		}
		groups[i].n++
		which[j] = i
	}
	backing := make([]protocols.Message, len(msgs))
	out := make([][]protocols.Message, len(groups))
	off := 0
	for i, g := range groups {
		out[i] = backing[off : off : off+g.n]
		off += g.n
	}
	for j, m := range msgs {
		out[which[j]] = append(out[which[j]], m)
	}
	return out
}

// enqueue queues unit for member to as a whole, or drops it as a whole
// (DefaultQueueLen). Called with t.mu read-locked.
func (t *Host) enqueue(to protocols.ID, unit []protocols.Message) {
	if t.closed {
		t.stats.dropN(DropClosed, len(unit))
		return
	}
	ps := t.peers[to]
	if ps == nil {
		t.stats.dropN(DropUnknownPeer, len(unit))
		return
	}
	t.sending(ps)
	ps.senderOnce.Do(func() {
		// Under t.mu with t.closed false: Close has not begun waiting.
		t.wg.Add(1)
		go t.runSender(ps)
	})
	for {
		q := ps.queued.Load()
		if q >= int64(t.cfg.QueueLen) {
			t.stats.dropN(DropQueueFull, len(unit))
			return
		}
		if ps.queued.CompareAndSwap(q, q+int64(len(unit))) {
			break
		}
	}
	select {
	case ps.queue <- unit:
	default:
		// Not reached: the channel holds QueueLen units and the count
		// admits fewer than QueueLen messages before this one.
		ps.queued.Add(-int64(len(unit)))
		t.stats.dropN(DropQueueFull, len(unit))
	}
}

// peerOf returns the admitted member id, or nil.
func (t *Host) peerOf(id protocols.ID) *peerState {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.peers[id]
}

// member returns the member ID a peer id belongs to.
func (t *Host) member(p peer.ID) (protocols.ID, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.byPeer[p]
	return id, ok
}

// runSender owns one peer's outbound stream: it gathers queued units,
// opens the stream lazily (negotiating BatchProtocolID, else ProtocolID),
// writes everything gathered in one write, and after a failure waits an
// exponentially growing backoff before trying again.
func (t *Host) runSender(ps *peerState) {
	defer t.wg.Done()
	log := t.log.With(zap.Uint64("member", uint64(ps.id)), zap.Stringer("peer", ps.pid))
	var s network.Stream
	var v2 bool // s speaks BatchProtocolID
	defer func() {
		if s != nil {
			_ = s.Close()
		}
	}()
	backoff := t.cfg.MinBackoff
	failures := 0
	pending := make([]protocols.Message, 0, maxWrite)
	kinds := make([]protocols.MessageKind, 0, maxWrite)
	enc := newMapEncoder()
	var pk framePacker
	take := func(unit []protocols.Message) {
		ps.queued.Add(-int64(len(unit)))
		pending = append(pending, unit...)
	}
	for {
		pending = pending[:0]
		select {
		case <-ps.stop:
			return
		case unit := <-ps.queue:
			take(unit)
		}
	drain:
		for len(pending) < maxWrite {
			select {
			case unit := <-ps.queue:
				take(unit)
			default:
				break drain
			}
		}
		if s != nil && s.Conn().IsClosed() {
			_ = s.Reset()
			s = nil
		}
		var err error
		lost := len(pending)
		if s == nil {
			heardBefore := ps.heard.Load()
			if s, err = t.openStream(ps); err == nil {
				v2 = s.Protocol() == protocol.ID(BatchProtocolID)
			} else if ps.heard.Load() == heardBefore {
				// The member refused or did not answer a connection and
				// said nothing meanwhile: as good as a failed probe, and
				// known at the first message rather than at the next
				// probe (up to ProbeAfter later). A leader's heartbeats
				// find a member that restarted under a new identity
				// within 50 ms, so the rejoin starts that much sooner.
				ps.failed.Store(true)
			}
		}
		if err == nil {
			kinds = t.encodeWrite(log, &pk, enc, kinds[:0], pending, v2)
			if len(kinds) == 0 {
				continue
			}
			lost = len(kinds)
			_ = s.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
			if _, err = s.Write(pk.out); err != nil {
				// A partial write leaves the stream mid-frame: only a
				// fresh stream can carry the next message.
				_ = s.Reset()
				s = nil
				err = fmt.Errorf("write: %w", err)
			}
		}
		if err == nil {
			if failures > 0 {
				log.Info("peer reachable again", zap.Int("failed_attempts", failures))
			}
			failures, backoff = 0, t.cfg.MinBackoff
			for _, k := range kinds {
				t.stats.sent[k].Add(1)
			}
			t.stats.wrote(pk.frames, len(pk.out))
			continue
		}
		t.stats.dropN(DropSendFailed, lost)
		select {
		case <-ps.stop:
			// Removed while sending (a member that left): the gater now
			// refuses the dial, and that is no outage to report.
			return
		default:
		}
		failures++
		// One warning per outage; the retries stay at debug level, and
		// so does everything once this node is stopping (Quiesce).
		lvl := log.Debug
		if failures == 1 && !t.stopping.Load() {
			lvl = log.Warn
		}
		lvl("cannot send to peer; dropping messages and retrying with backoff",
			zap.Int("dropped", lost), zap.Duration("backoff", backoff),
			zap.String("hint", t.dialHint(err)), zap.Error(err))
		timer := time.NewTimer(backoff)
		select {
		case <-ps.stop:
			timer.Stop()
			return
		case <-ps.kick:
			// Heard from again: try at once, and from the shortest
			// backoff, instead of waiting up to MaxBackoff.
			timer.Stop()
			backoff = t.cfg.MinBackoff
			continue
		case <-timer.C:
		}
		backoff = min(2*backoff, t.cfg.MaxBackoff)
	}
}

// encodeWrite encodes msgs into pk.out for a stream of the negotiated
// protocol: coalesced frames on v2, one frame per message on v1, where a
// named election's message is dropped (DropUnsupported), never sent, and
// returns kinds with the kind of each message that goes. A message that
// cannot be encoded is dropped and logged.
func (t *Host) encodeWrite(log *zap.Logger, pk *framePacker, enc *mapEncoder, kinds []protocols.MessageKind, msgs []protocols.Message, v2 bool) []protocols.MessageKind {
	pk.reset(t.cfg.MaxMessageBytes)
	unsupported := 0
	for _, m := range msgs {
		if !v2 && m.Election != "" {
			unsupported++
			continue
		}
		b, err := enc.encode(m)
		if err != nil {
			t.stats.drop(Reason(err))
			log.Error("refusing to send a message that cannot be encoded", zap.Stringer("msg", m), zap.Error(err))
			continue
		}
		if v2 {
			pk.add(b)
		} else {
			// A v1 body is the same map: the default election's
			// messages carry no "el" key.
			pk.out = binary.BigEndian.AppendUint32(pk.out, uint32(len(b)))
			pk.out = append(pk.out, b...)
			pk.frames++
		}
		kinds = append(kinds, m.Kind)
	}
	pk.flush()
	if unsupported > 0 {
		t.stats.dropN(DropUnsupported, unsupported)
		warnLimited(log, "dropping named elections' messages to a peer that speaks only "+ProtocolID,
			zap.Int("dropped", unsupported),
			zap.String("hint", "the peer runs a release that knows only the default election: upgrade it to take part in named elections"))
	}
	return kinds
}

// dialHint turns the usual causes of a failed send into advice, because the
// libp2p errors for a failed connection do not name the key.
func (t *Host) dialHint(err error) string {
	keyed := t.admit != nil
	switch {
	case keyed && (errors.Is(err, ErrNotAdmitted) || strings.Contains(err.Error(), "admission:")):
		return "the admission handshake failed: the peer most likely holds none of this node's installed cluster keys (gossip.key; agent keys list shows them)"
	case keyed && strings.Contains(err.Error(), "negotiate security protocol"):
		return "the handshake failed: the peer most likely has a different cluster key (gossip.key)"
	case keyed && errors.Is(err, context.DeadlineExceeded):
		return "the peer did not complete the connection in time: check that it runs, is reachable and has the same cluster key (gossip.key); a key mismatch can stall the handshake"
	case errors.Is(err, context.DeadlineExceeded):
		return "the peer did not complete the connection in time: check that it runs and is reachable"
	case keyed:
		return "if the peer is running, check that it has the same cluster key (gossip.key) and that it admits this node as a member"
	default:
		return "if the peer is running, check that it admits this node as a member and that neither side uses a cluster key the other lacks"
	}
}

func (t *Host) openStream(ps *peerState) (network.Stream, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	pids := []protocol.ID{BatchProtocolID, ProtocolID}
	if t.cfg.onlyV1 {
		pids = pids[1:]
	}
	s, err := t.h.NewStream(ctx, ps.pid, pids...)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	// We never read from an outbound stream; replies travel on the
	// peer's own outbound stream to us.
	_ = s.CloseRead()
	return s, nil
}

// handleStream reads one inbound stream, of either election protocol,
// until it ends. Every frame is checked against the current membership:
// the connection proved only that the remote holds its key, not that it
// may speak for a member ID.
func (t *Host) handleStream(s network.Stream) {
	remote := s.Conn().RemotePeer()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = s.Reset()
		return
	}
	id, ok := t.byPeer[remote]
	if !ok {
		t.mu.Unlock()
		t.stats.drop(DropUnauthorized)
		t.refusedLog(remote)("refusing election stream: remote peer is not a current member",
			zap.Stringer("peer", remote), zap.Stringer("remote_addr", s.Conn().RemoteMultiaddr()))
		_ = s.Reset()
		return
	}
	t.streams[s] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.streams, s)
		t.mu.Unlock()
		t.wg.Done()
	}()
	_ = s.CloseWrite()
	log := t.log.With(zap.Uint64("member", uint64(id)), zap.Stringer("peer", remote))

	v2 := s.Protocol() == protocol.ID(BatchProtocolID)
	var (
		fr    frameReader
		bd    batchDecoder
		batch []protocols.Message
	)
	for {
		body, err := fr.readBody(s, t.cfg.MaxMessageBytes)
		if err == nil {
			if v2 {
				batch, err = bd.decode(batch, body)
			} else {
				var m protocols.Message
				m, err = DecodeMessage(body)
				batch = append(batch[:0], m)
			}
		}
		if err == io.EOF {
			_ = s.Close()
			return
		}
		if err != nil {
			reason := Reason(err)
			if reason == ReasonOther {
				// The stream or connection ended (reset, closed host,
				// removed peer): nothing wrong with the data.
				log.Debug("election stream ended", zap.Error(err))
			} else {
				t.stats.drop(reason)
				warnLimited(log, "closing election stream: bad frame", zap.String("reason", reason), zap.Error(err))
			}
			_ = s.Reset()
			return
		}
		cur, ok := t.member(remote)
		if !ok {
			t.stats.drop(DropUnauthorized)
			log.Warn("closing election stream: remote peer is no longer a member")
			_ = s.Reset()
			return
		}
		// A frame is taken or refused whole: one message that speaks
		// for another member condemns the stream it came on.
		for _, m := range batch {
			if m.From != cur {
				t.stats.drop(DropSpoofedFrom)
				log.Warn("closing election stream: message From does not match the sending member",
					zap.Uint64("from", uint64(m.From)), zap.Uint64("expected", uint64(cur)), zap.Stringer("kind", m.Kind))
				_ = s.Reset()
				return
			}
		}
		t.stats.framesIn.Add(1)
		if ps := t.peerOf(cur); ps != nil {
			t.heard(ps)
		}
		for _, m := range batch {
			if m.To != t.cfg.Self && m.To != protocols.None {
				t.stats.drop(DropMisaddressed)
				log.Debug("dropping misaddressed message", zap.Stringer("msg", m))
				continue
			}
			// Wait for room rather than drop: each member's stream has
			// one reader, and the readers waiting on a full Inbound are
			// served in turn, so a member that floods only slows its own
			// stream (and, through flow control, its own sender's queue)
			// and can no longer get other members' heartbeats dropped.
			select {
			case t.inbound <- m:
				// The usual case, without a select over two channels:
				// a coalesced frame hands over a message per election.
			default:
				select {
				case t.inbound <- m:
				case <-t.ctx.Done():
					_ = s.Reset()
					return
				}
			}
			t.stats.received[m.Kind].Add(1)
		}
	}
}

// Quiesce tells the host that this node has begun a clean shutdown: a
// peer it cannot reach from now on is logged at debug level, not as a
// warning. Peers stopping at the same moment (a whole cluster stopped at
// once) are expected to be unreachable, and nothing done about it would
// matter to a node that is leaving; the agent logs how its handover ended.
func (t *Host) Quiesce() { t.stopping.Store(true) }

// Close implements Transport: it stops senders and readers, closes the
// libp2p host and then Inbound. It is idempotent.
func (t *Host) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		for _, ps := range t.peers {
			close(ps.stop)
		}
		t.peers = map[protocols.ID]*peerState{}
		t.byPeer = map[peer.ID]protocols.ID{}
		streams := make([]network.Stream, 0, len(t.streams))
		for s := range t.streams {
			streams = append(streams, s)
		}
		t.mu.Unlock()
		t.cancel()
		for _, s := range streams {
			_ = s.Reset()
		}
		if err := t.h.Close(); err != nil {
			t.closeErr = fmt.Errorf("transport: close libp2p host: %w", err)
		}
		t.wg.Wait()
		close(t.inbound)
	})
	return t.closeErr
}

// How long, and how many, removed peers are remembered (refusedLog).
const (
	rememberRemoved = time.Minute
	maxRemembered   = 64
)

// rememberRemoved records that pid was removed at now. Called with t.mu
// held.
func (t *Host) rememberRemoved(pid peer.ID, now time.Time) {
	if t.removed == nil {
		t.removed = map[peer.ID]time.Time{}
	}
	for p, at := range t.removed {
		if now.Sub(at) > rememberRemoved || len(t.removed) >= maxRemembered {
			delete(t.removed, p)
		}
	}
	t.removed[pid] = now
}

// refusedLog returns how to log a refused peer: at debug level for a
// member removed within the last minute — one that left cleanly still
// dials while it stops (its handover, its last heartbeats) — and as a
// rate-limited warning for anyone else.
func (t *Host) refusedLog(p peer.ID) func(string, ...zap.Field) {
	t.mu.RLock()
	at, ok := t.removed[p]
	t.mu.RUnlock()
	if ok && time.Since(at) <= rememberRemoved {
		return t.log.Debug
	}
	return func(msg string, fields ...zap.Field) { warnLimited(t.log, msg, fields...) }
}

// refusedAdmission logs a peer that failed the admission handshake and
// remembers it, by member when gossip knows it, for AdmissionRefused.
func (t *Host) refusedAdmission(p peer.ID, err error) {
	t.mu.Lock()
	id, member := t.byPeer[p]
	if member {
		if t.admitRefused == nil {
			t.admitRefused = map[protocols.ID]time.Time{}
		}
		t.admitRefused[id] = time.Now()
	}
	t.mu.Unlock()
	fields := []zap.Field{zap.Stringer("peer", p), zap.Error(err),
		zap.String("hint", "the peer holds none of this node's installed cluster keys: install the key in use on it (agent keys install), or it was removed while the peer still used it")}
	if member {
		fields = append(fields, zap.Uint64("member", uint64(id)))
	}
	warnLimited(t.log, "refused a connection: the peer proved no installed cluster key", fields...)
}

// KeysChanged tells the transport that the installed keys changed: every
// connection admitted with a key no longer installed is closed. It returns
// how many were.
func (t *Host) KeysChanged() int {
	if t.admit == nil {
		return 0
	}
	return t.admit.revalidate()
}

// AdmissionRefused returns the members refused by the admission handshake
// within the last window, with the time of the last refusal: a member
// that lacks the key in use, or still uses a removed one.
func (t *Host) AdmissionRefused(window time.Duration) map[protocols.ID]time.Time {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := map[protocols.ID]time.Time{}
	for id, at := range t.admitRefused {
		if time.Since(at) <= window {
			out[id] = at
		}
	}
	return out
}

// gater refuses connections from and to peer ids that are not current
// members. It is defence in depth only: libp2p may report a connection as
// established to a dialer that this side refused, so handleStream checks
// membership again for every message.
type gater struct{ t *Host }

func (g gater) InterceptPeerDial(p peer.ID) bool {
	_, ok := g.t.member(p)
	return ok
}

func (g gater) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

func (g gater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

func (g gater) InterceptSecured(dir network.Direction, p peer.ID, addrs network.ConnMultiaddrs) bool {
	if _, ok := g.t.member(p); ok {
		return true
	}
	g.t.stats.drop(DropUnauthorized)
	g.t.refusedLog(p)("refusing connection: remote peer is not a current member",
		zap.Stringer("peer", p), zap.Stringer("remote_addr", addrs.RemoteMultiaddr()), zap.Stringer("direction", dir),
		zap.String("hint", "a member is admitted once gossip introduces it: if this peer is one, this node has not heard of it yet (it restarted without gossip.join or a member snapshot, or gossip cannot reach it)"))
	return false
}

func (g gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// PeerCount returns how many members are admitted (tests check that churn
// does not grow it).
func (t *Host) PeerCount() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.peers)
}
