package transport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/conclave-agent/conclave/protocols"
)

// keySet is a keyring the test changes while hosts run.
type keySet struct {
	mu   sync.Mutex
	keys [][]byte
}

func (k *keySet) get() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([][]byte(nil), k.keys...)
}

func (k *keySet) set(keys ...[]byte) {
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
}

func keyed(ks *keySet) func(*Config) {
	return func(c *Config) { c.Keys = ks.get; c.DialTimeout = 2 * time.Second }
}

// delivered sends from a to b until b receives one of these messages, or
// five seconds pass.
func delivered(t *testing.T, a, b *testHost, ctx uint64) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		a.Send(b.cfg.Self, msg(protocols.MsgVote, a.cfg.Self, b.cfg.Self, ctx))
		select {
		case m := <-b.Inbound():
			// Earlier rounds' extra sends may still arrive: only this
			// round's context counts.
			if m.From == a.cfg.Self && m.Context == ctx {
				return true
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// A rotation seen by the transport: members that share any installed
// key talk whatever their primaries; once the old key is removed, a
// member that never installed the new one is refused, its admitted
// connection included.
func TestAdmissionAcceptsAnyInstalledKey(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	ka, kb := &keySet{}, &keySet{}
	ka.set(old)
	kb.set(old)
	a := newTestHost(t, 1, nil, keyed(ka))
	b := newTestHost(t, 2, nil, keyed(kb))
	admit(t, a, b)
	admit(t, b, a)
	if !delivered(t, a, b, 1) || !delivered(t, b, a, 2) {
		t.Fatal("two members with the same key did not talk")
	}
	// b installs and uses the new key; a missed the install.
	kb.set(next, old)
	if n := b.KeysChanged(); n != 0 {
		t.Errorf("KeysChanged after an install closed %d connections, want 0", n)
	}
	if !delivered(t, a, b, 3) || !delivered(t, b, a, 4) {
		t.Fatal("members sharing the old key stopped talking when one made a new key primary")
	}
	// b removes the old key: a proves nothing b has.
	kb.set(next)
	if n := b.KeysChanged(); n == 0 {
		t.Error("KeysChanged after removing the key a connection was admitted with closed nothing")
	}
	if delivered(t, a, b, 5) {
		t.Fatal("a member holding only a removed key was still admitted")
	}
	waitFor(t, "b to name a as refused", func() bool { _, ok := b.AdmissionRefused(time.Minute)[1]; return ok })
	// a installs the new key late: admitted again.
	ka.set(next, old)
	if !delivered(t, a, b, 6) {
		t.Fatal("a member that installed the key in use was not admitted again")
	}
}

// A peer that skips the handshake gets no stream served, even with the
// right peer id: admission, not the connection, is what lets it in.
func TestUnadmittedStreamIsRefused(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	raw := newRawHost(t, testKey)
	if err := b.SetPeer(7, raw.ID().String(), raw.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.Decode(b.PeerID())
	full, _ := peer.AddrInfoFromString(b.Addrs()[0])
	raw.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The embedded host skips rawHost's handshake.
	s, err := raw.Host.NewStream(ctx, bID, protocol.ID(ProtocolID))
	if err == nil {
		f, _ := EncodeFrame(msg(protocols.MsgVote, 7, 2, 1))
		_, _ = s.Write(f)
		buf := make([]byte, 1)
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err = s.Read(buf); err == nil {
			t.Fatal("unadmitted stream stayed open")
		}
		_ = s.Reset()
	}
	expectNothing(t, b)
}

// FuzzReadMACs: the proofs decoder never panics, never allocates beyond
// its bound, and returns whole MACs.
func FuzzReadMACs(f *testing.F) {
	f.Add(encodeMACs([][]byte{bytes.Repeat([]byte{1}, admitMACLen)}))
	f.Add([]byte{0})
	f.Add([]byte{255})
	f.Add([]byte{2, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		macs, err := readMACs(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(macs) == 0 || len(macs) > admitMaxKeys {
			t.Fatalf("%d MACs accepted", len(macs))
		}
		for _, m := range macs {
			if len(m) != admitMACLen {
				t.Fatalf("MAC of %d bytes", len(m))
			}
		}
		if !bytes.Equal(encodeMACs(macs), b[:1+len(macs)*admitMACLen]) {
			t.Fatal("decoded MACs do not encode back to the input")
		}
	})
}
