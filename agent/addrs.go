package agent

import (
	"fmt"
	"net"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/netaddr"
)

// published is what this agent tells its peers to dial, decided before
// gossip and the transport start.
type published struct {
	// gossipAdvertise is passed to memberlist as its advertise address
	// ("" lets memberlist use the bind address).
	gossipAdvertise string
	// gossipReason says why, for the log ("" when configured).
	gossipReason string
	// transport is the one IP the transport publishes from a wildcard
	// listen (invalid: publish what libp2p listens on, or the
	// configured advertise address).
	transport       netip.Addr
	transportReason string
}

// publishAddrs picks the addresses to publish when gossip.bind or
// transport.listen is a wildcard and the matching advertise key is unset.
// peers are the gossip addresses this agent will contact (join list and the
// member snapshot): the address of the route to them is the one they can
// reach us on.
func publishAddrs(env netaddr.Env, cfg config.Config, peers []string) (published, error) {
	var p published
	host, port, err := net.SplitHostPort(cfg.Gossip.Bind)
	if err != nil {
		return p, fmt.Errorf("agent: gossip.bind %q: %w", cfg.Gossip.Bind, err)
	}
	var gossipIP netip.Addr
	switch {
	case cfg.Gossip.Advertise != "":
		if h, _, err := net.SplitHostPort(cfg.Gossip.Advertise); err == nil {
			gossipIP, _ = netip.ParseAddr(h)
		}
	case netaddr.IsWildcard(host):
		f := netaddr.IPv4
		if ip, err := netip.ParseAddr(host); err == nil {
			f = netaddr.FamilyOf(ip)
		}
		c, err := env.Choose(f, peers)
		if err != nil {
			return p, fmt.Errorf("agent: gossip.bind %q listens on every address and none can be published: %w; "+
				"set gossip.advertise (host:port) and transport.advertise (multiaddr) to the address other hosts reach this one on",
				cfg.Gossip.Bind, err)
		}
		gossipIP = c.Addr
		p.gossipAdvertise = net.JoinHostPort(c.Addr.String(), port)
		p.gossipReason = c.Reason
	default:
		gossipIP, _ = netip.ParseAddr(host)
	}
	gossipIP = gossipIP.Unmap()

	if cfg.Transport.Advertise != "" {
		return p, nil
	}
	lip, ok := listenIP(cfg.Transport.Listen)
	if !ok || !lip.IsUnspecified() {
		return p, nil
	}
	f := netaddr.FamilyOf(lip)
	if gossipIP.IsValid() && netaddr.FamilyOf(gossipIP) == f && !gossipIP.IsLoopback() && !gossipIP.IsUnspecified() {
		p.transport = gossipIP
		p.transportReason = "the address gossip publishes"
		return p, nil
	}
	c, err := env.Choose(f, peers)
	if err != nil {
		return p, fmt.Errorf("agent: transport.listen %q listens on every address and none can be published: %w; "+
			"set transport.advertise (multiaddr) and gossip.advertise (host:port) to the address other hosts reach this one on",
			cfg.Transport.Listen, err)
	}
	p.transport, p.transportReason = c.Addr, c.Reason
	return p, nil
}

// listenIP returns the IP of a /ip4/… or /ip6/… listen multiaddr.
func listenIP(listen string) (netip.Addr, bool) {
	m, err := ma.NewMultiaddr(listen)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, code := range []int{ma.P_IP4, ma.P_IP6} {
		if v, err := m.ValueForProtocol(code); err == nil {
			ip, err := netip.ParseAddr(v)
			return ip, err == nil
		}
	}
	return netip.Addr{}, false
}
