package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ipnet "github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/pnet"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/conclave-agent/conclave/protocols"
)

// oldHost is a libp2p host built as v0.1.0 built its own: TCP, Noise,
// yamux, and a private network under DerivePSK of its one cluster key.
// Its election frames arrive on got.
type oldHost struct {
	host.Host
	got chan protocols.Message
}

func newOldHost(t *testing.T, key []byte) *oldHost {
	t.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport()),
		libp2p.Security(noise.ID, noise.New),
		libp2p.PrivateNetwork(DerivePSK(key)),
		libp2p.DisableRelay(), libp2p.Ping(false), libp2p.DisableMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	o := &oldHost{Host: h, got: make(chan protocols.Message, 64)}
	h.SetStreamHandler(protocol.ID(ProtocolID), func(s network.Stream) {
		defer s.Close()
		for {
			m, err := ReadFrame(s, 1<<16)
			if err != nil {
				return
			}
			select {
			case o.got <- m:
			default:
			}
		}
	})
	return o
}

// admitOld makes b know o as member 7 of version 1 (v0.1.0), and o know
// b's address.
func admitOld(t *testing.T, b *testHost, o *oldHost) {
	t.Helper()
	b.SetPeerVersion(o.ID().String(), LegacyPnetVersion)
	if err := b.SetPeer(7, o.ID().String(), o.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.Decode(b.PeerID())
	full, _ := peer.AddrInfoFromString(b.Addrs()[0])
	o.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
}

// sendFromOld opens an election stream from o to b and writes one frame;
// it reports whether that worked.
func sendFromOld(t *testing.T, o *oldHost, b *testHost, ctx uint64) error {
	t.Helper()
	bID, _ := peer.Decode(b.PeerID())
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := o.NewStream(c, bID, protocol.ID(ProtocolID))
	if err != nil {
		return err
	}
	defer s.Close()
	frame, err := EncodeFrame(msg(protocols.MsgVote, 7, b.cfg.Self, ctx))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(frame)
	return err
}

// Waits for a delivery: long when it must happen, short when it must not
// (a failure deadline, and a bound on how long a test that expects no
// delivery waits; a slow machine can only make that test pass, not fail).
const (
	mustArrive   = waitLimit
	mustNotAfter = 1500 * time.Millisecond
)

// oldDelivered sends from b to o until o receives this round's message,
// or within passes.
func oldDelivered(b *testHost, o *oldHost, ctx uint64, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b.Send(7, msg(protocols.MsgVote, b.cfg.Self, 7, ctx))
		select {
		case m := <-o.got:
			if m.Context == ctx {
				return true
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// recvFromOld sends from o to b until b receives this round's message,
// or within passes.
func recvFromOld(t *testing.T, b *testHost, o *oldHost, ctx uint64, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := sendFromOld(t, o, b, ctx); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case m := <-b.Inbound():
			if m.From == 7 && m.Context == ctx {
				return true
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// A keyed host of the tree and a v0.1.0 host of the same key talk both
// ways: the old one dials in under pnet, the tree dials it under pnet.
func TestV010PeerTalksBothWays(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	o := newOldHost(t, testKey)
	admitOld(t, b, o)
	if !recvFromOld(t, b, o, 1, mustArrive) {
		t.Fatal("the tree did not receive a v0.1.0 peer's message under pnet")
	}
	// A fresh connection of the tree's own making.
	_ = b.h.Network().ClosePeer(o.ID())
	if !oldDelivered(b, o, 2, mustArrive) {
		t.Fatal("a v0.1.0 peer did not receive the tree's message")
	}
	var dir network.Direction
	for _, c := range b.h.Network().ConnsToPeer(o.ID()) {
		dir = c.Stat().Direction
	}
	if dir != network.DirOutbound {
		t.Fatalf("the tree's message went over a connection of direction %v, want one it dialled", dir)
	}
}

// Without SetPeerVersion, the tree dials an old peer in the clear, which
// it cannot read: the version from gossip is what makes the dial work.
func TestV010PeerNeedsItsVersion(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	o := newOldHost(t, testKey)
	if err := b.SetPeer(7, o.ID().String(), o.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if oldDelivered(b, o, 1, mustNotAfter) {
		t.Fatal("a v0.1.0 peer read the tree's plain connection: the test cannot tell pnet from none")
	}
	// The plain dial may still be running (it stalls until its timeout)
	// and fail after this: the dials that follow must not wait out
	// libp2p's dial backoff.
	b.SetPeerVersion(o.ID().String(), LegacyPnetVersion)
	if !oldDelivered(b, o, 2, mustArrive) {
		for _, e := range b.logs.All() {
			t.Log(e.Message, e.ContextMap())
		}
		t.Fatal("once known as version 1, the v0.1.0 peer still did not receive the tree's message")
	}
	// Upgraded to the tree's version, the peer is dialled in the clear
	// again.
	b.SetPeerVersion(o.ID().String(), 2)
	pid := o.ID()
	if b.admit.pnet.isLegacy(pid) {
		t.Fatal("a peer of version 2 is still dialled under pnet")
	}
}

// Inbound, an old peer is admitted under any installed key; outbound the
// tree uses its primary, and a peer of another key is refused.
func TestV010PeerKeys(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	ks := &keySet{}
	ks.set(k2, k1)
	b := newTestHost(t, 2, nil, keyed(ks))
	o := newOldHost(t, k1)
	admitOld(t, b, o)
	if !recvFromOld(t, b, o, 1, mustArrive) {
		t.Fatal("a v0.1.0 peer of a secondary installed key was refused")
	}
	ks.set(k1, k2)
	_ = b.h.Network().ClosePeer(o.ID())
	if !oldDelivered(b, o, 2, mustArrive) {
		t.Fatal("with the old peer's key primary, the tree's message did not reach it")
	}
	// Removing its key closes the old peer's connection and refuses it.
	ks.set(k2)
	if n := b.KeysChanged(); n == 0 {
		t.Error("KeysChanged after removing a pnet connection's key closed nothing")
	}
	before := AdmissionFailures()
	if recvFromOld(t, b, o, 3, mustNotAfter) {
		t.Fatal("a v0.1.0 peer of a removed key was still admitted")
	}
	if AdmissionFailures() == before {
		t.Error("refusing a v0.1.0 peer of a removed key was not counted as an admission failure")
	}
	expectNothing(t, b)
}

// Two agents of the tree talk whatever version one believes the other
// speaks: during an upgrade or a roll-back, gossip may still name an
// agent's previous version when it is dialled.
func TestTreePeerDialledUnderPnetIsAdmitted(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey)
	b.SetPeerVersion(a.PeerID(), LegacyPnetVersion)
	admit(t, a, b)
	admit(t, b, a)
	if !delivered(t, b, a, 1) || !delivered(t, a, b, 2) {
		t.Fatal("an agent of the tree dialled under pnet was not admitted")
	}
	aID, _ := peer.Decode(a.PeerID())
	under := false
	for _, c := range b.h.Network().ConnsToPeer(aID) {
		_, ok := b.admit.pnet.admitKey(c)
		under = under || ok
	}
	if !under {
		t.Fatal("b did not dial a under pnet: the test tests nothing")
	}
}

// writeConn is enough of a net.Conn for pnet to write into.
type writeConn struct {
	replayConn
	out bytes.Buffer
}

func (w *writeConn) Write(p []byte) (int, error) { return w.out.Write(p) }

// pnetFirst returns what a v0.1.0 dialer writes first under psk.
func pnetFirst(t testing.TB, psk ipnet.PSK, rest []byte) []byte {
	w := &writeConn{}
	c, err := pnet.NewProtectedConn(psk, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(append(bytes.Clone(msHeader), rest...)); err != nil {
		t.Fatal(err)
	}
	return w.out.Bytes()
}

func TestSniffPnet(t *testing.T) {
	psks := []ipnet.PSK{DerivePSK([]byte("k0")), DerivePSK([]byte("k1"))}
	plain := append(bytes.Clone(msHeader), "/noise\n"...)
	prefix, i, err := sniffPnet(bytes.NewReader(plain), psks)
	if err != nil || i != -1 || !bytes.Equal(prefix, msHeader) {
		t.Fatalf("plain multistream: prefix %q, key %d, %v", prefix, i, err)
	}
	first := pnetFirst(t, psks[1], []byte("/noise\n"))
	r := bytes.NewReader(first)
	prefix, i, err = sniffPnet(r, psks)
	if err != nil || i != 1 || !bytes.Equal(prefix, first[:sniffLen]) {
		t.Fatalf("pnet under the second key: key %d, %v", i, err)
	}
	if r.Len() != len(first)-sniffLen {
		t.Fatalf("sniffing read %d bytes, want %d", len(first)-r.Len(), sniffLen)
	}
	other := pnetFirst(t, DerivePSK([]byte("k2")), nil)
	if _, _, err := sniffPnet(bytes.NewReader(other), psks); !errors.Is(err, errNotConclave) {
		t.Fatalf("pnet under a key not installed: %v, want errNotConclave", err)
	}
	if _, _, err := sniffPnet(bytes.NewReader(msHeader[:5]), psks); err == nil {
		t.Fatal("a short plain start was accepted")
	}
	garbage := make([]byte, 100)
	_, _ = rand.Read(garbage)
	if _, _, err := sniffPnet(bytes.NewReader(garbage), psks); !errors.Is(err, errNotConclave) {
		t.Fatalf("random bytes: %v, want errNotConclave", err)
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzSniffPnet: whatever a peer sends first, the sniffer never panics,
// reads at most sniffLen bytes, calls plain only the exact multistream
// header, and hands back exactly what it read.
func FuzzSniffPnet(f *testing.F) {
	psks := []ipnet.PSK{DerivePSK([]byte("k0")), DerivePSK([]byte("k1"))}
	f.Add(append(bytes.Clone(msHeader), "/noise\n"...))
	f.Add(pnetFirst(f, psks[0], nil))
	f.Add(msHeader[:3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cr := &countingReader{r: bytes.NewReader(b)}
		prefix, i, err := sniffPnet(cr, psks)
		if cr.n > sniffLen {
			t.Fatalf("read %d bytes, at most %d allowed", cr.n, sniffLen)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(prefix, b[:cr.n]) {
			t.Fatalf("prefix %x is not what was read, %x", prefix, b[:cr.n])
		}
		if i < 0 && !bytes.Equal(prefix, msHeader) {
			t.Fatalf("%x taken as plain multistream", prefix)
		}
		if i >= len(psks) {
			t.Fatalf("key %d of %d", i, len(psks))
		}
	})
}
