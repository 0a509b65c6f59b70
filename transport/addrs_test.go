package transport

import (
	"net/netip"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

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
