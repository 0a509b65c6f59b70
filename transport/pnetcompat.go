package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ipnet "github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/net/pnet"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Agents of v0.1.0 (peer protocol version 1) protected a keyed cluster's
// libp2p connections with libp2p's private network (pnet): one pre-shared
// key derived from the one cluster key, XSalsa20 over the whole TCP
// stream, and no admission handshake. This file lets a keyed host of the
// tree talk to them, so that a keyed cluster can be upgraded one agent at
// a time:
//
//   - inbound, every connection is sniffed (sniffPnet): a conclave node of
//     the tree starts with multistream's header in the clear, a v0.1.0
//     node with pnet's 24-byte nonce and that same header encrypted. The
//     header is known plaintext, so the sniffer finds which installed key
//     the old node uses, or refuses the connection;
//   - outbound, a peer that gossip says speaks version 1 (SetPeerVersion)
//     is dialled through pnet under the primary key: an old node has one
//     key, and until the upgrade is over it is the cluster's primary.
//
// A connection under pnet skips the admission handshake (the old node
// does not run it): pnet under an installed key stands for the proof,
// and the connection is closed like an admitted one when its key is
// removed. docs/security.md says what that proves and what it does not.

// pnetDomain separates the pnet pre-shared key from every other use of
// the cluster key; it is v0.1.0's, and must never change.
const pnetDomain = "conclave libp2p private network v1\x00"

// LegacyPnetVersion is the peer protocol version (membership's
// ProtocolVersion) of agents that admit peers with pnet: v0.1.0.
const LegacyPnetVersion uint16 = 1

// maxLegacyPeers bounds the peers remembered as needing pnet: a cluster
// has far fewer members, and gossip from a key holder must not grow the
// set without end.
const maxLegacyPeers = 4096

// DerivePSK returns the 32-byte libp2p private-network key v0.1.0 derives
// from a cluster key: SHA-256 over a domain-separation string and the key.
func DerivePSK(clusterKey []byte) ipnet.PSK {
	h := sha256.New()
	h.Write([]byte(pnetDomain))
	h.Write(clusterKey)
	return ipnet.PSK(h.Sum(nil))
}

// msHeader is what a multistream-select dialer writes first: the
// varint-prefixed "/multistream/1.0.0\n". Both the tree's dialers and
// v0.1.0's (inside pnet) start security negotiation with it.
var msHeader = []byte("\x13/multistream/1.0.0\n")

// pnetNonceLen is the nonce pnet sends ahead of its ciphertext.
const pnetNonceLen = 24

// sniffLen is the most sniffPnet reads: a nonce and an encrypted header.
const sniffLen = pnetNonceLen + 20

// errNotConclave: the first bytes of an inbound connection are neither a
// multistream header nor one under pnet with an installed key.
var errNotConclave = errors.New("neither multistream nor pnet under an installed cluster key (another cluster's key, or not a conclave node)")

// sniffPnet reads the first bytes a dialer sent, at most sniffLen, and
// tells how the connection goes on: psk < 0 for a plain connection, else
// the index in psks of the key a pnet dialer used. prefix is every byte
// read, to be read again by whatever handles the connection. Whatever r
// holds, it reads at most sniffLen bytes, never panics, and allocates a
// few small buffers per key.
func sniffPnet(r io.Reader, psks []ipnet.PSK) (prefix []byte, psk int, err error) {
	buf := make([]byte, sniffLen)
	if _, err := io.ReadFull(r, buf[:len(msHeader)]); err != nil {
		return nil, -1, fmt.Errorf("read the first bytes: %w", err)
	}
	if bytes.Equal(buf[:len(msHeader)], msHeader) {
		return buf[:len(msHeader)], -1, nil
	}
	if _, err := io.ReadFull(r, buf[len(msHeader):]); err != nil {
		return nil, -1, fmt.Errorf("read the first bytes: %w", err)
	}
	for i, k := range psks {
		if pnetOpens(k, buf) {
			return buf, i, nil
		}
	}
	return nil, -1, errNotConclave
}

// pnetOpens reports whether first (a nonce and 20 bytes of ciphertext)
// decrypts to msHeader under psk. It decrypts with libp2p's own pnet
// conn, so it cannot disagree with the conn that carries the connection.
func pnetOpens(psk ipnet.PSK, first []byte) bool {
	c, err := pnet.NewProtectedConn(psk, &replayConn{prefix: bytes.Clone(first)})
	if err != nil {
		return false
	}
	got := make([]byte, len(msHeader))
	if _, err := io.ReadFull(c, got); err != nil {
		return false
	}
	return bytes.Equal(got, msHeader)
}

// replayConn reads prefix, then Conn. With a nil Conn it only reads
// prefix (pnetOpens), and ends with io.EOF.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	if c.Conn == nil {
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

// pnetCompat is a keyed host's memory of v0.1.0 peers and of the
// connections it runs under pnet. It is safe for concurrent use.
type pnetCompat struct {
	// keys returns the installed cluster keys, primary first.
	keys func() [][]byte

	mu sync.Mutex
	// legacy holds the peers to dial under pnet.
	legacy map[peer.ID]struct{}
	// changed holds when each peer last moved in or out of legacy.
	changed map[peer.ID]time.Time
	// conns holds the live connections under pnet, by their TCP
	// endpoints, with the admission key (AdmitKey) of the cluster key
	// each runs under: what admission records as the key the peer proved.
	conns map[connKey][]byte
	// refused is told of every inbound connection sniffPnet refused
	// as not conclave; it must not block.
	refused func()
}

// connKey names a live TCP connection by its endpoints: unique among
// the connections open at one time.
type connKey struct{ local, remote string }

func keyOf(c network.ConnMultiaddrs) connKey {
	return connKey{c.LocalMultiaddr().String(), c.RemoteMultiaddr().String()}
}

func newPnetCompat(keys func() [][]byte, refused func()) *pnetCompat {
	return &pnetCompat{keys: keys, refused: refused, legacy: map[peer.ID]struct{}{},
		changed: map[peer.ID]time.Time{}, conns: map[connKey][]byte{}}
}

// setLegacy records whether p must be dialled under pnet, and reports
// whether that changed.
func (pc *pnetCompat) setLegacy(p peer.ID, legacy bool) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, was := pc.legacy[p]
	if !legacy {
		delete(pc.legacy, p)
	} else if len(pc.legacy) < maxLegacyPeers {
		pc.legacy[p] = struct{}{}
	}
	_, is := pc.legacy[p]
	if was == is {
		return false
	}
	now := time.Now()
	for q, at := range pc.changed {
		if now.Sub(at) > changedWindow {
			delete(pc.changed, q)
		}
	}
	if len(pc.changed) < maxLegacyPeers {
		pc.changed[p] = now
	}
	return true
}

// changedWindow is how long after a peer's dial mode changed its dials
// skip libp2p's dial backoff: a dial made the old way, still running when
// gossip told the new one, fails after it and would otherwise hold the
// next dials back for 5 s or more. It spans a few dial timeouts.
const changedWindow = 30 * time.Second

// recentlyChanged reports whether p's dial mode changed within
// changedWindow.
func (pc *pnetCompat) recentlyChanged(p peer.ID) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	at, ok := pc.changed[p]
	return ok && time.Since(at) <= changedWindow
}

func (pc *pnetCompat) isLegacy(p peer.ID) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, ok := pc.legacy[p]
	return ok
}

// admitKey returns the admission key of the connection c runs under pnet,
// and false when c is not under pnet.
func (pc *pnetCompat) admitKey(c network.ConnMultiaddrs) ([]byte, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	k, ok := pc.conns[keyOf(c)]
	return k, ok
}

func (pc *pnetCompat) register(k connKey, admitKey []byte) {
	pc.mu.Lock()
	pc.conns[k] = admitKey
	pc.mu.Unlock()
}

func (pc *pnetCompat) unregister(k connKey) {
	pc.mu.Lock()
	delete(pc.conns, k)
	pc.mu.Unlock()
}

// compatUpgrader is libp2p's upgrader (without a private network) with
// pnet where a v0.1.0 peer needs it: inbound connections pass through
// sniffListener, outbound ones to a legacy peer are wrapped before the
// upgrade.
type compatUpgrader struct {
	transport.Upgrader
	pc *pnetCompat
}

// GateMaListener sniffs every accepted connection (lazily, in the
// upgrade's own goroutine and under its timeout: the accept loop never
// waits for a peer's first bytes).
func (u compatUpgrader) GateMaListener(l manet.Listener) transport.GatedMaListener {
	return u.Upgrader.GateMaListener(sniffListener{Listener: l, pc: u.pc})
}

// UpgradeListener is GateMaListener, then UpgradeGatedMaListener.
func (u compatUpgrader) UpgradeListener(t transport.Transport, l manet.Listener) transport.Listener {
	return u.UpgradeGatedMaListener(t, u.GateMaListener(l))
}

// Upgrade upgrades c; a connection dialled to a legacy peer goes under
// pnet with the primary key first.
func (u compatUpgrader) Upgrade(ctx context.Context, t transport.Transport, c manet.Conn, dir network.Direction, p peer.ID, scope network.ConnManagementScope) (transport.CapableConn, error) {
	if dir == network.DirOutbound && u.pc.isLegacy(p) {
		keys := u.pc.keys()
		if len(keys) == 0 {
			_ = c.Close()
			scope.Done()
			return nil, errors.New("pnet toward a v0.1.0 peer: no cluster key installed")
		}
		pconn, err := pnet.NewProtectedConn(DerivePSK(keys[0]), c)
		if err != nil {
			_ = c.Close()
			scope.Done()
			return nil, fmt.Errorf("pnet toward a v0.1.0 peer: %w", err)
		}
		cc := &compatConn{Conn: c, pc: u.pc, key: keyOf(c)}
		cc.decided, cc.rw = true, pconn
		cc.registered = true
		u.pc.register(cc.key, AdmitKey(keys[0]))
		c = cc
	}
	return u.Upgrader.Upgrade(ctx, t, c, dir, p, scope)
}

// sniffListener hands out accepted connections as compatConns.
type sniffListener struct {
	manet.Listener
	pc *pnetCompat
}

func (l sniffListener) Accept() (manet.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &compatConn{Conn: c, pc: l.pc, key: keyOf(c)}, nil
}

// compatConn is a TCP connection that is either plain or under pnet. An
// inbound one decides on its first Read or Write (the listener's
// multistream writes first, but only after the dialer spoke, so reading
// first holds nothing up); Close unblocks a sniff that waits.
type compatConn struct {
	manet.Conn // the TCP connection: addresses, deadlines, Close
	pc         *pnetCompat
	key        connKey

	sniffMu sync.Mutex // held while sniffing
	decided bool
	rw      io.ReadWriter // what Read and Write go through, once decided
	err     error         // the sniff's error, once decided

	regMu      sync.Mutex
	registered bool
	closed     bool
}

func (c *compatConn) decide() (io.ReadWriter, error) {
	c.sniffMu.Lock()
	defer c.sniffMu.Unlock()
	if c.decided {
		return c.rw, c.err
	}
	c.decided = true
	keys := c.pc.keys()
	psks := make([]ipnet.PSK, len(keys))
	for i, k := range keys {
		psks[i] = DerivePSK(k)
	}
	prefix, i, err := sniffPnet(c.Conn, psks)
	if err != nil {
		if errors.Is(err, errNotConclave) && c.pc.refused != nil {
			c.pc.refused()
		}
		c.err = fmt.Errorf("inbound connection from %s: %w", c.RemoteMultiaddr(), err)
		_ = c.Close()
		return nil, c.err
	}
	replay := &replayConn{Conn: c.Conn, prefix: prefix}
	if i < 0 {
		c.rw = replay
		return c.rw, nil
	}
	pconn, err := pnet.NewProtectedConn(psks[i], replay)
	if err != nil {
		c.err = err
		_ = c.Close()
		return nil, err
	}
	c.regMu.Lock()
	if !c.closed {
		c.registered = true
		c.pc.register(c.key, AdmitKey(keys[i]))
	}
	c.regMu.Unlock()
	c.rw = pconn
	return c.rw, nil
}

func (c *compatConn) Read(p []byte) (int, error) {
	rw, err := c.decide()
	if err != nil {
		return 0, err
	}
	return rw.Read(p)
}

func (c *compatConn) Write(p []byte) (int, error) {
	rw, err := c.decide()
	if err != nil {
		return 0, err
	}
	return rw.Write(p)
}

// Close forgets the connection's pnet key and closes it.
func (c *compatConn) Close() error {
	c.regMu.Lock()
	c.closed = true
	if c.registered {
		c.registered = false
		c.pc.unregister(c.key)
	}
	c.regMu.Unlock()
	return c.Conn.Close()
}

// SetKeepAlive, SetKeepAlivePeriod and SetLinger pass libp2p's TCP
// settings on to the TCP connection.
func (c *compatConn) SetKeepAlive(on bool) error {
	if k, ok := c.Conn.(interface{ SetKeepAlive(bool) error }); ok {
		return k.SetKeepAlive(on)
	}
	return nil
}

// SetKeepAlivePeriod: see SetKeepAlive.
func (c *compatConn) SetKeepAlivePeriod(d time.Duration) error {
	if k, ok := c.Conn.(interface{ SetKeepAlivePeriod(time.Duration) error }); ok {
		return k.SetKeepAlivePeriod(d)
	}
	return nil
}

// SetLinger: see SetKeepAlive.
func (c *compatConn) SetLinger(sec int) error {
	if k, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return k.SetLinger(sec)
	}
	return nil
}

// SetPeerVersion tells the transport which conclave peer protocol version
// (membership.Member.Version) the libp2p peer peerID speaks. With cluster
// keys, this host dials agents of LegacyPnetVersion (v0.1.0) under
// libp2p's private network with the primary key, as they expect, and
// every other through the admission handshake. Without keys, or for a
// peer id that does not parse, it does nothing.
func (t *Host) SetPeerVersion(peerID string, version uint16) {
	if t.admit == nil || t.admit.pnet == nil {
		return
	}
	pid, err := peer.Decode(peerID)
	if err != nil {
		return
	}
	if !t.admit.pnet.setLegacy(pid, version == LegacyPnetVersion) {
		return
	}
	// Dials made the other way failed for a reason now gone (an agent
	// rolled back before gossip said so): the next one goes at once, not
	// after the sender's backoff, nor libp2p's (leanHost.Connect).
	t.mu.RLock()
	ps := t.peers[t.byPeer[pid]]
	t.mu.RUnlock()
	if ps != nil {
		ps.wake()
	}
}
