package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/internal/tcpfwd"
	"github.com/conclave-agent/conclave/protocols"
)

// waitLimit bounds every wait for an asynchronous effect. It is a failure
// deadline on a loopback network, not a measured timing.
const waitLimit = 15 * time.Second

var testKey = []byte("0123456789abcdef0123456789abcdef")

type testHost struct {
	*Host
	logs *observer.ObservedLogs
}

func newTestHost(t testing.TB, self protocols.ID, key []byte, mod ...func(*Config)) *testHost {
	t.Helper()
	// Each test sees the warnings it provokes, whatever earlier tests
	// logged within the rate limit's interval.
	freshRemoteLogs(t)
	core, logs := observer.New(zap.DebugLevel)
	cfg := Config{
		DataDir:    t.TempDir(),
		Listen:     "/ip4/127.0.0.1/tcp/0",
		ClusterKey: key,
		Logger:     zap.New(core),
		Self:       self,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
	}
	for _, m := range mod {
		m(&cfg)
	}
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testHost{Host: h, logs: logs}
}

// admit makes a accept b as a member.
func admit(t testing.TB, a, b *testHost) {
	t.Helper()
	if err := a.SetPeer(b.cfg.Self, b.PeerID(), b.Addrs()[0]); err != nil {
		t.Fatalf("SetPeer: %v", err)
	}
}

func msg(kind protocols.MessageKind, from, to protocols.ID, ctx uint64) protocols.Message {
	return protocols.Message{Kind: kind, From: from, To: to, Term: 1, Context: ctx}
}

func recv(t testing.TB, h *testHost) protocols.Message {
	t.Helper()
	select {
	case m, ok := <-h.Inbound():
		if !ok {
			t.Fatal("inbound closed")
		}
		return m
	case <-time.After(waitLimit):
		t.Fatalf("node %d: no message within %v; stats %+v", h.cfg.Self, waitLimit, h.Stats())
	}
	return protocols.Message{}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dropped(h *testHost, reason string) uint64 { return h.Stats().Dropped[reason] }

func expectNothing(t testing.TB, h *testHost) {
	t.Helper()
	select {
	case m := <-h.Inbound():
		t.Fatalf("node %d received %v, want nothing", h.cfg.Self, m)
	default:
	}
}

func hasLog(logs *observer.ObservedLogs, snippet string) bool {
	return logs.FilterMessageSnippet(snippet).Len() > 0
}

// outboundElectionStreams counts a's open outbound election streams to b,
// of either protocol.
func outboundElectionStreams(a *testHost, b *testHost) int {
	pid, _ := peer.Decode(b.PeerID())
	n := 0
	for _, c := range a.h.Network().ConnsToPeer(pid) {
		for _, s := range c.GetStreams() {
			p := s.Protocol()
			if (p == ProtocolID || p == BatchProtocolID) && s.Stat().Direction == network.DirOutbound {
				n++
			}
		}
	}
	return n
}

func TestHostsExchangeBothWaysOnReusedStreams(t *testing.T) {
	hosts := []*testHost{newTestHost(t, 1, testKey), newTestHost(t, 2, testKey), newTestHost(t, 3, testKey)}
	for _, a := range hosts {
		for _, b := range hosts {
			if a != b {
				admit(t, a, b)
			}
		}
	}
	const perPair = 50
	for i := range perPair {
		for _, a := range hosts {
			for _, b := range hosts {
				if a != b {
					a.Send(b.cfg.Self, msg(protocols.MsgHeartbeat, a.cfg.Self, b.cfg.Self, uint64(i)))
				}
			}
		}
	}
	for _, b := range hosts {
		next := map[protocols.ID]uint64{}
		for range perPair * (len(hosts) - 1) {
			m := recv(t, b)
			if m.To != b.cfg.Self || m.Kind != protocols.MsgHeartbeat {
				t.Fatalf("node %d got %v", b.cfg.Self, m)
			}
			// One stream per direction keeps each sender's order.
			if m.Context != next[m.From] {
				t.Fatalf("node %d: from %d got context %d, want %d", b.cfg.Self, m.From, m.Context, next[m.From])
			}
			next[m.From]++
		}
	}
	for _, a := range hosts {
		// The reader counts a message just after handing it over, so the
		// last count may trail the receive above by a moment.
		waitUntil(t, "the received counters to catch up", func() bool { return a.Stats().Received["Heartbeat"] >= 2*perPair })
		st := a.Stats()
		if st.Sent["Heartbeat"] != 2*perPair || st.Received["Heartbeat"] != 2*perPair {
			t.Errorf("node %d stats %+v", a.cfg.Self, st)
		}
		if len(st.Dropped) != 0 {
			t.Errorf("node %d dropped %v", a.cfg.Self, st.Dropped)
		}
		for _, b := range hosts {
			if a != b {
				if n := outboundElectionStreams(a, b); n != 1 {
					t.Errorf("node %d has %d outbound election streams to %d, want 1", a.cfg.Self, n, b.cfg.Self)
				}
			}
		}
	}
}

// TestSimultaneousFirstSends: fresh members that message each other at the
// same moment both get through (with TCP reuseport they dialled into one
// simultaneous-open connection whose handshake failed).
func TestSimultaneousFirstSends(t *testing.T) {
	for round := range 10 {
		hosts := []*testHost{newTestHost(t, 1, testKey), newTestHost(t, 2, testKey), newTestHost(t, 3, testKey)}
		for _, a := range hosts {
			for _, b := range hosts {
				if a != b {
					admit(t, a, b)
				}
			}
		}
		for _, a := range hosts {
			for _, b := range hosts {
				if a != b {
					a.Send(b.cfg.Self, msg(protocols.MsgVote, a.cfg.Self, b.cfg.Self, uint64(round)))
				}
			}
		}
		for _, b := range hosts {
			recv(t, b)
			recv(t, b)
			if d := b.Stats().Dropped; len(d) != 0 {
				t.Fatalf("round %d: node %d dropped %v", round, b.cfg.Self, d)
			}
		}
		for _, h := range hosts {
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestUnregisteredPeerIsRefused(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey)
	admit(t, a, b) // b never admits a
	for i := range 5 {
		a.Send(2, msg(protocols.MsgVote, 1, 2, uint64(i)))
	}
	waitFor(t, "b to refuse a", func() bool { return dropped(b, DropUnauthorized) > 0 })
	waitFor(t, "a to count failed sends", func() bool { return dropped(a, DropSendFailed) > 0 })
	expectNothing(t, b)
	if !hasLog(b.logs, "not a current member") {
		t.Fatalf("b's log does not say why: %v", b.logs.All())
	}
}

func TestRemovedPeerIsRefused(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey)
	admit(t, a, b)
	admit(t, b, a)
	a.Send(2, msg(protocols.MsgVote, 1, 2, 0))
	recv(t, b)
	b.RemovePeer(1)
	waitFor(t, "a's connection to close", func() bool {
		pid, _ := peer.Decode(b.PeerID())
		return len(a.h.Network().ConnsToPeer(pid)) == 0
	})
	for i := range 5 {
		a.Send(2, msg(protocols.MsgVote, 1, 2, uint64(i)))
	}
	waitFor(t, "a to count failed sends", func() bool { return dropped(a, DropSendFailed) > 0 })
	expectNothing(t, b)
}

func TestWrongClusterKeyCannotConnect(t *testing.T) {
	// A key mismatch either fails the handshake at once or, when the
	// garbage happens to parse as a length, stalls it until the timeout.
	short := func(c *Config) { c.DialTimeout = time.Second }
	a := newTestHost(t, 1, testKey, short)
	b := newTestHost(t, 2, []byte("another cluster's key, 32 bytes!"), short)
	admit(t, a, b)
	admit(t, b, a)
	a.Send(2, msg(protocols.MsgVote, 1, 2, 0))
	waitFor(t, "a to count a failed send", func() bool { return dropped(a, DropSendFailed) > 0 })
	expectNothing(t, b)
	entries := a.logs.FilterMessageSnippet("cannot send to peer").All()
	if len(entries) == 0 {
		t.Fatalf("a's log does not say why: %v", a.logs.All())
	}
	if hint := entries[0].ContextMap()["hint"]; !strings.Contains(fmt.Sprint(hint), "cluster key") {
		t.Fatalf("hint %q does not mention the cluster key", hint)
	}
	t.Logf("dialer logged: %s %v", entries[0].Message, entries[0].ContextMap())
	// Both sides refuse; the warning is rate-limited process-wide, so
	// whichever side logs it first speaks for both here.
	waitFor(t, "the refused admission to be logged", func() bool {
		for _, h := range []*testHost{a, b} {
			if h.logs.FilterMessageSnippet("proved no installed cluster key").FilterLevelExact(zap.WarnLevel).Len() > 0 {
				return true
			}
		}
		return false
	})
	if AdmissionFailures() == 0 {
		t.Error("no admission failure counted")
	}
}

func TestSpoofedFromIsDropped(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey)
	c := newTestHost(t, 3, testKey)
	admit(t, a, b)
	admit(t, b, a)
	admit(t, b, c)
	a.Send(2, msg(protocols.MsgVote, 3, 2, 0)) // a claims to be 3
	waitFor(t, "b to drop the spoofed message", func() bool { return dropped(b, DropSpoofedFrom) > 0 })
	if !hasLog(b.logs, "From does not match") {
		t.Fatalf("b's log does not say why: %v", b.logs.All())
	}
	// a's honest messages still get through once its sender reconnects;
	// the first ones may die with the stream b reset.
	deadline := time.Now().Add(waitLimit)
	for got := false; !got; {
		a.Send(2, msg(protocols.MsgVote, 1, 2, 1))
		select {
		case m := <-b.Inbound():
			if m.From != 1 {
				t.Fatalf("delivered %v", m)
			}
			got = true
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("honest message never delivered after a spoofed one")
			}
		}
	}
}

func TestMisaddressedIsDropped(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey)
	admit(t, a, b)
	admit(t, b, a)
	a.Send(2, msg(protocols.MsgVote, 1, 9, 0))
	a.Send(2, msg(protocols.MsgVote, 1, 2, 1))
	if m := recv(t, b); m.Context != 1 {
		t.Fatalf("delivered %v", m)
	}
	if dropped(b, DropMisaddressed) != 1 {
		t.Fatalf("stats %+v", b.Stats())
	}
}

// rawHost is a bare libp2p host that runs the admission handshake with
// key, used to write arbitrary bytes on an election stream.
type rawHost struct {
	host.Host
	adm *admission
}

// NewStream admits the connection to p, then opens a stream on it.
func (r *rawHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	if err := r.Connect(ctx, peer.AddrInfo{ID: p}); err != nil {
		return nil, err
	}
	conns := r.Network().ConnsToPeer(p)
	if len(conns) == 0 {
		return nil, fmt.Errorf("no connection to %s", p)
	}
	if err := r.adm.ensure(ctx, conns[0]); err != nil {
		return nil, err
	}
	return r.Host.NewStream(ctx, p, pids...)
}

func newRawHost(t *testing.T, key []byte) *rawHost {
	t.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport()),
		libp2p.Security(noise.ID, noise.New),
		libp2p.DisableRelay(), libp2p.Ping(false), libp2p.DisableMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	adm := &admission{keys: func() [][]byte { return [][]byte{AdmitKey(key)} }, timeout: waitLimit, conns: map[network.Conn]*admitState{}}
	h.SetStreamHandler(protocol.ID(AdmitProtocolID), adm.respond)
	return &rawHost{Host: h, adm: adm}
}

func TestBadFramesAreDroppedAndCounted(t *testing.T) {
	b := newTestHost(t, 2, testKey, func(c *Config) { c.MaxMessageBytes = 256 })
	a := newTestHost(t, 1, testKey)
	admit(t, a, b)
	admit(t, b, a)
	raw := newRawHost(t, testKey)
	if err := b.SetPeer(7, raw.ID().String(), raw.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.Decode(b.PeerID())
	for _, addr := range b.Addrs() {
		full, _ := peer.AddrInfoFromString(addr)
		raw.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
	}
	valid, err := EncodeFrame(msg(protocols.MsgVote, 7, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reason string
		data   []byte
	}{
		{ReasonTooLarge, []byte{0xff, 0xff, 0xff, 0xff}},
		{ReasonTooLarge, binary.BigEndian.AppendUint32(nil, 257)},
		{ReasonMalformed, frameOf([]byte{0xc1})},
		{ReasonMalformed, frameOf(cat(keyZ, []byte{0xdb, 0xff, 0xff, 0xff, 0xff}))},
		{ReasonMalformed, frameOf(cat(keyZ, repeat([]byte{0x91}, 200), []byte{0xc0}))},
		{ReasonUnknownKind, frameOf([]byte{0x81, 0xa1, 'k', 0xcc, 200})},
		{ReasonOutOfRange, frameOf([]byte{0x81, 0xa1, 'k', 0xcd, 0x01, 0x00})},
		{ReasonTrailingBytes, frameOf(cat(valid[HeaderLen:], []byte{0xc0}))},
		{ReasonTruncated, []byte{0, 0, 0, 50, 0x81}},
	}
	for i, c := range cases {
		before := dropped(b, c.reason)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		s, err := raw.NewStream(ctx, bID, protocol.ID(ProtocolID))
		cancel()
		if err != nil {
			t.Fatalf("case %d: NewStream: %v", i, err)
		}
		// A valid frame first: the bad one must not take it down with it.
		if _, err := s.Write(append(append([]byte{}, valid...), c.data...)); err != nil {
			t.Fatalf("case %d: write: %v", i, err)
		}
		_ = s.CloseWrite() // ends a truncated frame
		if m := recv(t, b); m.From != 7 {
			t.Fatalf("case %d: got %v", i, m)
		}
		waitFor(t, "drop reason "+c.reason, func() bool { return dropped(b, c.reason) > before })
		// b resets the stream: reading it ends in an error, not EOF.
		_ = s.SetReadDeadline(time.Now().Add(waitLimit))
		if _, err := s.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("case %d: stream still open after a bad frame: %v", i, err)
		}
		s.Close()
	}
	if !hasLog(b.logs, "bad frame") {
		t.Fatal("no log line for bad frames")
	}
	// The host survives: a member still gets through.
	a.Send(2, msg(protocols.MsgVote, 1, 2, 42))
	if m := recv(t, b); m.From != 1 || m.Context != 42 {
		t.Fatalf("got %v", m)
	}
}

func TestIdentityPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Listen: "/ip4/127.0.0.1/tcp/0", Self: 1}
	h1, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id1 := h1.PeerID()
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	h2, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id2 := h2.PeerID()
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if id1 != id2 {
		t.Fatalf("peer id changed across restart: %s then %s", id1, id2)
	}
	other, err := New(context.Background(), Config{DataDir: t.TempDir(), Listen: "/ip4/127.0.0.1/tcp/0", Self: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.PeerID() == id1 {
		t.Fatal("two data directories share a peer id")
	}
}

func TestCorruptKeyFileIsAnErrorNamingIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFile)
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Config{DataDir: dir, Listen: "/ip4/127.0.0.1/tcp/0", Self: 1})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

func TestSendNeverBlocks(t *testing.T) {
	a := newTestHost(t, 1, testKey, func(c *Config) { c.QueueLen = 4 })
	b := newTestHost(t, 2, testKey)
	// Admit b at an address where nobody listens, once b is gone.
	addr := b.Addrs()[0]
	pid := b.PeerID()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPeer(2, pid, addr); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	for i := range n {
		a.Send(2, msg(protocols.MsgHeartbeat, 1, 2, uint64(i)))
	}
	if dropped(a, DropQueueFull) == 0 {
		t.Fatalf("no queue_full drops: %+v", a.Stats())
	}
	a.Send(99, msg(protocols.MsgHeartbeat, 1, 99, 0))
	if dropped(a, DropUnknownPeer) != 1 {
		t.Fatalf("unknown peer not counted: %+v", a.Stats())
	}
}

func TestSetPeerRejectsBadInput(t *testing.T) {
	a := newTestHost(t, 1, nil)
	b := newTestHost(t, 2, nil)
	c := newTestHost(t, 3, nil)
	good := b.Addrs()[0]
	for _, tc := range []struct {
		id         protocols.ID
		peer, addr string
	}{
		{0, b.PeerID(), good},
		{1, b.PeerID(), good},
		{2, "not-a-peer-id", good},
		{2, b.PeerID(), "not a multiaddr"},
		{2, b.PeerID(), c.Addrs()[0]}, // /p2p/ part names another peer
		{2, a.PeerID(), "/ip4/127.0.0.1/tcp/1"},
	} {
		if err := a.SetPeer(tc.id, tc.peer, tc.addr); err == nil {
			t.Errorf("SetPeer(%d, %q, %q) succeeded", tc.id, tc.peer, tc.addr)
		}
	}
	if err := a.SetPeer(2, b.PeerID(), good); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPeer(4, b.PeerID(), good); err == nil {
		t.Error("one peer id admitted as two members")
	}
}

func TestCloseClosesInboundAndRefusesSends(t *testing.T) {
	a := newTestHost(t, 1, nil)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-a.Inbound(); ok {
		t.Fatal("inbound still open")
	}
	a.Send(2, msg(protocols.MsgVote, 1, 2, 0))
	if dropped(a, DropClosed) != 1 {
		t.Fatalf("stats %+v", a.Stats())
	}
}

// TestStreamCheckDoesNotTrustTheConnection removes a member from b's table
// behind the gater's back (its connection stays up, as it does on the
// accepting side of a refused dial): b must still refuse its messages.
func TestStreamCheckDoesNotTrustTheConnection(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	raw := newRawHost(t, testKey)
	if err := b.SetPeer(7, raw.ID().String(), raw.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.Decode(b.PeerID())
	full, _ := peer.AddrInfoFromString(b.Addrs()[0])
	raw.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
	open := func() network.Stream {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		s, err := raw.NewStream(ctx, bID, protocol.ID(ProtocolID))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	frame := func(ctx uint64) []byte {
		f, err := EncodeFrame(msg(protocols.MsgVote, 7, 2, ctx))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	s := open()
	if _, err := s.Write(frame(1)); err != nil {
		t.Fatal(err)
	}
	recv(t, b)
	forget := func() {
		b.mu.Lock()
		delete(b.byPeer, raw.ID())
		b.mu.Unlock()
	}
	forget()
	// Mid-stream: the next message is refused and the stream closed.
	if _, err := s.Write(frame(2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "refusal mid-stream", func() bool { return dropped(b, DropUnauthorized) == 1 })
	if !hasLog(b.logs, "no longer a member") {
		t.Fatalf("no log line: %v", b.logs.All())
	}
	// New stream on the same, still open connection: refused at once.
	s2 := open()
	_, _ = s2.Write(frame(3))
	waitFor(t, "refusal of a new stream", func() bool { return dropped(b, DropUnauthorized) == 2 })
	expectNothing(t, b)
	s.Close()
	s2.Close()
}

// TestAdvertisedAddressThroughForwarder: a host that advertises a forwarder
// in front of its listen port publishes only that address, and a member
// that dials what was published reaches it through the forwarder.
func TestAdvertisedAddressThroughForwarder(t *testing.T) {
	fwd, err := tcpfwd.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() }) // after the hosts: cleanups run last-in first-out
	advertise := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", fwd.Port())
	a := newTestHost(t, 1, testKey, func(c *Config) { c.Advertise = advertise })
	listen := a.h.Network().ListenAddresses()
	if len(listen) != 1 {
		t.Fatalf("listen addresses %v, want one", listen)
	}
	port, err := listen[0].ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Start("127.0.0.1:" + port)

	want := advertise + "/p2p/" + a.PeerID()
	if got := a.Addrs(); len(got) != 1 || got[0] != want {
		t.Fatalf("Addrs() = %q, want only the advertised %q", got, want)
	}
	b := newTestHost(t, 2, testKey)
	admit(t, b, a) // b dials what a publishes
	admit(t, a, b)

	const n = 20
	for i := range n {
		b.Send(1, msg(protocols.MsgHeartbeat, 2, 1, uint64(i)))
	}
	for i := range n {
		if m := recv(t, a); m.From != 2 || m.Context != uint64(i) {
			t.Fatalf("a got %v, want heartbeat %d from 2", m, i)
		}
	}
	if fwd.Conns.Load() == 0 || fwd.Inbound.Load() == 0 {
		t.Fatalf("forwarder saw %d connections, %d bytes: the messages bypassed the advertised address", fwd.Conns.Load(), fwd.Inbound.Load())
	}
	pidA, _ := peer.Decode(a.PeerID())
	for _, c := range b.h.Network().ConnsToPeer(pidA) {
		if got := c.RemoteMultiaddr().String(); got != advertise {
			t.Errorf("b's connection to a goes to %s, want the forwarder %s", got, advertise)
		}
	}
	// Replies reach b as well (over the same connection, or one a dials).
	before := fwd.Inbound.Load() + fwd.Outbound.Load()
	a.Send(2, msg(protocols.MsgHeartbeatResp, 1, 2, 7))
	if m := recv(t, b); m.From != 1 || m.Kind != protocols.MsgHeartbeatResp {
		t.Fatalf("b got %v, want a's reply", m)
	}
	t.Logf("forwarder: %d connections, %d bytes in, %d bytes out (%d before the reply)",
		fwd.Conns.Load(), fwd.Inbound.Load(), fwd.Outbound.Load(), before)
}

func TestBadAdvertiseIsRefused(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:7947", "/ip4/127.0.0.1/udp/7947", "/ip4/127.0.0.1/tcp/7947/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"} {
		_, err := New(context.Background(), Config{DataDir: t.TempDir(), Listen: "/ip4/127.0.0.1/tcp/0", Self: 1, Advertise: bad})
		if err == nil || !strings.Contains(err.Error(), "advertise") {
			t.Errorf("New with advertise %q: %v, want an error naming the advertise address", bad, err)
		}
	}
}
