package transport

import (
	"crypto/rand"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/conclave-agent/conclave/protocols"

	"github.com/conclave-agent/conclave/internal/netaddr"
)

func TestPublishOnly(t *testing.T) {
	in := []ma.Multiaddr{
		ma.StringCast("/ip4/127.0.0.1/tcp/7947"),
		ma.StringCast("/ip4/172.17.0.1/tcp/7947"),
		ma.StringCast("/ip4/192.168.77.3/tcp/7947"),
	}
	got := publishOnly(in, netip.MustParseAddr("192.168.77.3"))
	if len(got) != 1 || got[0].String() != "/ip4/192.168.77.3/tcp/7947" {
		t.Fatalf("publishOnly = %v, want the 192.168.77.3 address alone", got)
	}
	// The chosen address is gone: everything but loopback.
	got = publishOnly(in, netip.MustParseAddr("10.0.0.1"))
	if len(got) != 2 || strings.Contains(got[0].String()+got[1].String(), "127.0.0.1") {
		t.Fatalf("publishOnly without the chosen address = %v, want both non-loopback addresses", got)
	}
	// Loopback alone is still published rather than nothing.
	got = publishOnly(in[:1], netip.MustParseAddr("10.0.0.1"))
	if len(got) != 1 {
		t.Fatalf("publishOnly on a loopback-only host = %v", got)
	}
}

// TestWildcardListenPublishesOneAddress listens on 0.0.0.0 on this machine:
// without Publish libp2p lists loopback first (the field failure), with it
// only the chosen address is published.
func TestWildcardListenPublishesOneAddress(t *testing.T) {
	c, err := netaddr.System.Choose(netaddr.IPv4, nil)
	if err != nil || c.Addr.IsLoopback() {
		t.Skipf("this machine has no IPv4 address but loopback (%v, %v)", c.Addr, err)
	}
	h := newTestHost(t, 1, nil, func(cfg *Config) {
		cfg.Listen = "/ip4/0.0.0.0/tcp/0"
		cfg.Publish = c.Addr
	})
	addrs := h.Addrs()
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "/ip4/"+c.Addr.String()+"/tcp/") {
		t.Fatalf("Addrs = %v, want only %v", addrs, c.Addr)
	}
}

// TestPeerChurnDoesNotGrow admits and removes members under ever new ids
// and peer ids, probing and sending to each: peers, senders and probers all
// go away with them.
func TestPeerChurnDoesNotGrow(t *testing.T) {
	a := newTestHost(t, 1, nil, func(c *Config) { c.ProbeAfter = 10 * time.Millisecond })
	b := newTestHost(t, 2, nil)
	admit(t, b, a)
	base := runtime.NumGoroutine()
	for i := range 200 {
		id := protocols.ID(1000 + i)
		other, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := peer.IDFromPrivateKey(other)
		// Unreachable addresses: the sender fails and backs off, the
		// prober fails; both must end with RemovePeer.
		if err := a.SetPeer(id, pid.String(), "/ip4/127.0.0.1/tcp/1"); err != nil {
			t.Fatal(err)
		}
		a.Send(id, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: id})
		a.RemovePeer(id)
	}
	admit(t, a, b)
	if n := a.PeerCount(); n != 1 {
		t.Fatalf("%d peers admitted after churn, want 1", n)
	}
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > base+20 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before the churn, %d after", base, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
