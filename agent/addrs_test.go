package agent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/netaddr"
)

// lanHost is a host with loopback and one 192.168 address and no default
// route: the set-up on which agents published 127.0.0.1 and never elected.
var lanHost = netaddr.Env{
	Addrs: func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.77.3")}, nil
	},
	Route: func(dst netip.Addr) (netip.Addr, error) {
		if netip.MustParsePrefix("192.168.77.0/24").Contains(dst) {
			return netip.MustParseAddr("192.168.77.3"), nil
		}
		return netip.Addr{}, errors.New("network is unreachable")
	},
}

func TestPublishAddrsWildcard(t *testing.T) {
	cfg := config.Default()
	cfg.Gossip.Bind = "0.0.0.0:7946"
	cfg.Transport.Listen = "/ip4/0.0.0.0/tcp/7947"
	p, err := publishAddrs(lanHost, cfg, []string{"192.168.77.1:7946"})
	if err != nil {
		t.Fatal(err)
	}
	if p.gossipAdvertise != "192.168.77.3:7946" || p.transport.String() != "192.168.77.3" {
		t.Fatalf("published gossip %q transport %v, want 192.168.77.3 for both", p.gossipAdvertise, p.transport)
	}
}

func TestPublishAddrsKeepsConfigured(t *testing.T) {
	cfg := config.Default()
	cfg.Gossip.Bind = "0.0.0.0:7946"
	cfg.Gossip.Advertise = "203.0.113.5:7946"
	cfg.Transport.Listen = "/ip4/0.0.0.0/tcp/7947"
	cfg.Transport.Advertise = "/ip4/203.0.113.5/tcp/7947"
	p, err := publishAddrs(lanHost, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.gossipAdvertise != "" || p.transport.IsValid() {
		t.Fatalf("advertise keys set, yet chose %q / %v", p.gossipAdvertise, p.transport)
	}
	// Specific binds publish themselves: nothing to choose.
	cfg = config.Default()
	if p, err = publishAddrs(lanHost, cfg, nil); err != nil || p.gossipAdvertise != "" || p.transport.IsValid() {
		t.Fatalf("loopback binds: %+v, %v", p, err)
	}
	// A wildcard listen next to a specific gossip bind publishes the
	// gossip address.
	cfg.Gossip.Bind = "192.168.77.3:7946"
	cfg.Transport.Listen = "/ip4/0.0.0.0/tcp/7947"
	if p, err = publishAddrs(lanHost, cfg, nil); err != nil || p.transport.String() != "192.168.77.3" {
		t.Fatalf("specific gossip bind, wildcard listen: %+v, %v", p, err)
	}
}

func TestPublishAddrsRefusesNamingBothKeys(t *testing.T) {
	onlyLoopback := netaddr.Env{Addrs: func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	cfg := config.Default()
	cfg.Gossip.Bind = "0.0.0.0:7946"
	cfg.Transport.Listen = "/ip4/0.0.0.0/tcp/7947"
	_, err := publishAddrs(onlyLoopback, cfg, []string{"192.168.77.1:7946"})
	if err == nil {
		t.Fatal("no usable address, yet no error")
	}
	for _, key := range []string{"gossip.advertise", "transport.advertise"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}
