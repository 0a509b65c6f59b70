package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	tptu "github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	msmux "github.com/multiformats/go-multistream"
)

// hostParts is what the election transport needs of libp2p.
type hostParts struct {
	key    crypto.PrivKey
	listen ma.Multiaddr
	gater  connmgr.ConnectionGater
	// admit, when set, runs the admission handshake on every connection
	// before any other stream (admit.go).
	admit *admission
	// addrs, when set, replaces the addresses the host announces.
	addrs func([]ma.Multiaddr) []ma.Multiaddr
}

// newLibp2pHost builds the libp2p host from the parts conclave uses — TCP
// without reuseport, Noise, yamux, and the admission handshake when keys
// are given — instead of calling libp2p.New. Importing the top-level go-libp2p
// package links its default transports whether they are used or not (QUIC,
// WebTransport, WebRTC with 17 pion modules), and its basic host links
// AutoNAT, hole punching, the relay service and UPnP/NAT-PMP port mapping,
// none of which a cluster on known TCP addresses uses. The resource manager
// keeps libp2p's auto-scaled default limits but for connections
// (connLimits).
//
// What is left out: identify (members learn each other's peer id and
// address from gossip; a peer running identify against this host gets "not
// supported" and carries on, as libp2p's own hosts do) and the connection
// manager's trimming (it trims above 192 connections; a cluster has one per
// member).
func newLibp2pHost(p hostParts) (h host.Host, err error) {
	pid, err := peer.IDFromPrivateKey(p.key)
	if err != nil {
		return nil, fmt.Errorf("peer id: %w", err)
	}
	// Until the host exists, everything made so far is closed on error;
	// after, the host's Close closes all of it.
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		return nil, fmt.Errorf("peerstore: %w", err)
	}
	closers = append(closers, ps.Close)
	if err := errors.Join(ps.AddPrivKey(pid, p.key), ps.AddPubKey(pid, p.key.GetPublic())); err != nil {
		return nil, fmt.Errorf("peerstore: %w", err)
	}
	limits := rcmgr.DefaultLimits
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(connLimits(limits.AutoScale())),
		rcmgr.WithConnRateLimiters(memberConnRate()))
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	closers = append(closers, rm.Close)
	bus := eventbus.NewBus()
	sw, err := swarm.NewSwarm(pid, ps, bus, swarm.WithConnectionGater(p.gater), swarm.WithResourceManager(rm))
	if err != nil {
		return nil, fmt.Errorf("swarm: %w", err)
	}
	closers = append(closers, sw.Close)

	muxers := []tptu.StreamMuxer{{ID: yamux.ID, Muxer: yamux.DefaultTransport}}
	security, err := noise.New(noise.ID, p.key, muxers)
	if err != nil {
		return nil, fmt.Errorf("noise: %w", err)
	}
	up, err := tptu.New([]sec.SecureTransport{security}, muxers, nil, rm, p.gater)
	if err != nil {
		return nil, fmt.Errorf("upgrader: %w", err)
	}
	if p.admit != nil && p.admit.pnet != nil {
		// Agents of v0.1.0 speak pnet (pnetcompat.go).
		up = compatUpgrader{Upgrader: up, pc: p.admit.pnet}
	}
	// Without reuseport: see the comment in New.
	tr, err := tcp.NewTCPTransport(up, rm, nil, tcp.DisableReuseport())
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	if err := sw.AddTransport(tr); err != nil {
		return nil, fmt.Errorf("swarm: %w", err)
	}
	if err := sw.Listen(p.listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	lh := &leanHost{sw: sw, ps: ps, rm: rm, bus: bus, mux: msmux.NewMultistreamMuxer[protocol.ID](), addrs: p.addrs, admit: p.admit}
	sw.SetStreamHandler(lh.handleStream)
	if a := p.admit; a != nil {
		a.conns = make(map[network.Conn]*admitState)
		lh.SetStreamHandler(protocol.ID(AdmitProtocolID), a.respond)
		sw.Notify(&network.NotifyBundle{DisconnectedF: func(_ network.Network, c network.Conn) { a.forget(c) }})
	}
	return lh, nil
}

// connLimits lifts the resource manager's connection limits from what
// libp2p scales with memory (an eighth of it) to what file descriptors
// allow (libp2p's own FD limit, half the process's). Scaled by memory, a
// host of 4 GiB allows 160 connections, 80 of them inbound, and one of
// 24 GiB 504 and 252: a voter holds a connection with every member that
// probes it, every observer of a fleet, so at a few hundred agents its
// inbound connections hit the limit, and the voters, refused, could not
// reach each other to elect. Admission still gates who may connect
// (admit.go) and the rate limiter how fast (memberConnRate). Streams,
// memory and the per-peer limits stay libp2p's.
func connLimits(scaled rcmgr.ConcreteLimitConfig) rcmgr.ConcreteLimitConfig {
	p := scaled.ToPartialLimitConfig()
	n := p.System.FD
	if n < p.System.Conns {
		return scaled
	}
	p.System.Conns, p.System.ConnsInbound, p.System.ConnsOutbound = n, n, n
	// Half-open connections, before their handshake: a restarted voter
	// is dialled by every observer at once.
	t := n / 4
	p.Transient.Conns, p.Transient.ConnsInbound, p.Transient.ConnsOutbound = max(t, p.Transient.Conns), max(t, p.Transient.ConnsInbound), max(t, p.Transient.ConnsOutbound)
	return p.Build(scaled)
}

// memberConnRate is the resource manager's limit on new connections per
// remote address, inbound and outbound alike. libp2p's default (a burst
// of 16, then one every 5 s per IPv4 address; none on loopback) is meant
// for public nodes; a cluster on a LAN spent the burst within a few
// restarts of one member — every dial its gater refused counts — and then
// each reconnection to that host waited up to 5 s ("rate limit
// exceeded", and the swarm's dial backoff after it). A member dials a
// peer at most every MinBackoff (100 ms) from its sender and every probe
// period from its prober, so allow 20 a second per address after a
// burst of 200: well above what agents sharing one address do while
// they reconnect, still a bound on a flood of handshakes from one
// address. Loopback stays unlimited, as in libp2p.
func memberConnRate() *rate.Limiter {
	per := func(prefix int) rate.SubnetLimit {
		return rate.SubnetLimit{PrefixLength: prefix, Limit: rate.Limit{RPS: 20, Burst: 200}}
	}
	return &rate.Limiter{
		NetworkPrefixLimits: []rate.PrefixLimit{
			{Prefix: netip.MustParsePrefix("127.0.0.0/8")},
			{Prefix: netip.MustParsePrefix("::1/128")},
		},
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{per(32)},
			IPv6SubnetLimits: []rate.SubnetLimit{per(64)},
			GracePeriod:      time.Minute,
		},
	}
}

// negotiationTimeout bounds protocol negotiation on a new stream, as
// libp2p's basic host does.
const negotiationTimeout = 10 * time.Second

// leanHost is a host.Host on a swarm: multistream-select on every stream,
// nothing else. It is what libp2p's basic host does for streams, without
// the services.
type leanHost struct {
	sw    *swarm.Swarm
	ps    peerstore.Peerstore
	rm    network.ResourceManager
	bus   event.Bus
	mux   *msmux.MultistreamMuxer[protocol.ID]
	addrs func([]ma.Multiaddr) []ma.Multiaddr
	admit *admission // nil: no admission handshake

	closeOnce sync.Once
	closeErr  error
}

var _ host.Host = (*leanHost)(nil)

func (h *leanHost) ID() peer.ID                       { return h.sw.LocalPeer() }
func (h *leanHost) Peerstore() peerstore.Peerstore    { return h.ps }
func (h *leanHost) Network() network.Network          { return h.sw }
func (h *leanHost) Mux() protocol.Switch              { return h.mux }
func (h *leanHost) EventBus() event.Bus               { return h.bus }
func (h *leanHost) ConnManager() connmgr.ConnManager  { return &connmgr.NullConnMgr{} }
func (h *leanHost) RemoveStreamHandler(p protocol.ID) { h.mux.RemoveHandler(p) }

// Addrs returns the listen addresses, unspecified ones (0.0.0.0, ::)
// expanded to the interfaces' addresses, through the addresses function
// when one is set.
func (h *leanHost) Addrs() []ma.Multiaddr {
	addrs, err := h.sw.InterfaceListenAddresses()
	if err != nil {
		addrs = h.sw.ListenAddresses()
	}
	if h.addrs != nil {
		return h.addrs(addrs)
	}
	return addrs
}

// Connect dials pi unless a connection is open. It ignores the swarm's
// dial backoff (5 s after a failed dial, growing by the square of the
// failures to 5 min): the callers pace their own dials — a sender's
// backoff from MinBackoff to MaxBackoff, the prober's period — and a
// member is worth dialing again the moment they decide so. Under the
// swarm's backoff, a member that restarted with a new identity and
// refused the first dial (it did not know this node yet) stayed
// undialable for 5 s after it learned this node, and two hosts plugged
// back after an outage could wait minutes for each other's backoff.
func (h *leanHost) Connect(ctx context.Context, pi peer.AddrInfo) error {
	h.ps.AddAddrs(pi.ID, pi.Addrs, peerstore.TempAddrTTL)
	if h.sw.Connectedness(pi.ID) == network.Connected {
		return nil
	}
	// Our sender and prober pace their own dials: libp2p's backoff after
	// a failed dial only held back a peer that restarted (rejoin).
	h.sw.Backoff().Clear(pi.ID)
	if h.admit != nil && h.admit.pnet != nil && h.admit.pnet.recentlyChanged(pi.ID) {
		// Failed dials made the way the peer no longer wants must not
		// hold back the first ones made its way (pnetcompat.go).
		ctx = network.WithForceDirectDial(ctx, "the peer's protocol version changed")
	}
	if _, err := h.sw.DialPeer(ctx, pi.ID); err != nil {
		return fmt.Errorf("failed to dial: %w", err)
	}
	return nil
}

func (h *leanHost) SetStreamHandler(p protocol.ID, handler network.StreamHandler) {
	h.mux.AddHandler(p, func(_ protocol.ID, rwc io.ReadWriteCloser) error {
		handler(rwc.(network.Stream))
		return nil
	})
}

func (h *leanHost) SetStreamHandlerMatch(p protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.mux.AddHandlerWithFunc(p, match, func(_ protocol.ID, rwc io.ReadWriteCloser) error {
		handler(rwc.(network.Stream))
		return nil
	})
}

// handleStream negotiates the protocol of a stream a peer opened and hands
// it to that protocol's handler.
func (h *leanHost) handleStream(s network.Stream) {
	_ = s.SetDeadline(time.Now().Add(negotiationTimeout))
	p, handle, err := h.mux.Negotiate(s)
	if err != nil {
		_ = s.ResetWithError(network.StreamProtocolNegotiationFailed)
		return
	}
	_ = s.SetDeadline(time.Time{})
	if h.admit != nil && p != AdmitProtocolID {
		// Nothing but the handshake is served on a connection that has
		// not proved an installed key.
		if err := h.admit.check(context.Background(), s.Conn()); err != nil {
			_ = s.Reset()
			return
		}
	}
	if err := s.SetProtocol(p); err != nil {
		_ = s.ResetWithError(network.StreamResourceLimitExceeded)
		return
	}
	_ = handle(p, s)
}

// NewStream dials p if needed, opens a stream and selects one of pids.
func (h *leanHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	if nodial, _ := network.GetNoDial(ctx); !nodial {
		if err := h.Connect(ctx, peer.AddrInfo{ID: p}); err != nil {
			return nil, err
		}
	}
	s, err := h.sw.NewStream(network.WithNoDial(ctx, "already dialed"), p)
	if err != nil {
		return nil, fmt.Errorf("failed to open stream: %w", err)
	}
	if h.admit != nil {
		if err := h.admit.ensure(ctx, s.Conn()); err != nil {
			_ = s.Reset()
			return nil, err
		}
	}
	type result struct {
		p   protocol.ID
		err error
	}
	done := make(chan result, 1)
	go func() {
		sel, err := msmux.SelectOneOf(pids, s)
		done <- result{sel, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		_ = s.ResetWithError(network.StreamProtocolNegotiationFailed)
		<-done
		return nil, fmt.Errorf("failed to negotiate protocol: %w", ctx.Err())
	}
	if r.err != nil {
		_ = s.ResetWithError(network.StreamProtocolNegotiationFailed)
		return nil, fmt.Errorf("failed to negotiate protocol: %w", r.err)
	}
	if err := s.SetProtocol(r.p); err != nil {
		_ = s.ResetWithError(network.StreamResourceLimitExceeded)
		return nil, err
	}
	return s, nil
}

// Close closes the swarm (every connection and listener), then the
// peerstore and the resource manager.
func (h *leanHost) Close() error {
	h.closeOnce.Do(func() {
		h.closeErr = errors.Join(h.sw.Close(), h.ps.Close(), h.rm.Close())
	})
	return h.closeErr
}
