// Package netaddr picks the address an agent publishes to its peers when it
// listens on a wildcard address (0.0.0.0 or ::) and no advertise key says
// which address to publish.
//
// A wildcard listener is reachable on every address of the host, but peers
// need one of them, and the wrong one fails silently: a loopback address
// makes every peer dial itself ("dial to self attempted"), and an address
// on a bridge peers cannot reach looks like a dead node. The choice, in
// order:
//
//  1. the local address of the route to a join peer (the kernel's own
//     answer to "which of my addresses does that peer see?"; asking sends
//     no packet);
//  2. the local address of the default route;
//  3. the first private (RFC 1918, RFC 4193) address of an interface that
//     is up, which is what memberlist picks by itself;
//  4. the first other global unicast address of an interface that is up;
//  5. loopback, only on a host that has no other address and only when no
//     join peer lies outside loopback (a one-host cluster).
//
// Otherwise Choose fails, and the caller tells the operator which advertise
// keys to set.
package netaddr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Family is the IP family of a listener.
type Family int

// Families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// FamilyOf returns the family of ip.
func FamilyOf(ip netip.Addr) Family {
	if ip.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Choice is a published address and why it was chosen.
type Choice struct {
	// Addr is the address to publish.
	Addr netip.Addr
	// Reason says where Addr came from, for the log.
	Reason string
}

// Env is how Choose sees the host; System is the real one, tests pass
// their own.
type Env struct {
	// Addrs lists the addresses of the interfaces that are up, in
	// interface order.
	Addrs func() ([]netip.Addr, error)
	// Route returns the local address the kernel would use to reach dst.
	Route func(dst netip.Addr) (netip.Addr, error)
	// Lookup resolves a host name (join addresses may be names).
	Lookup func(host string) ([]netip.Addr, error)
}

// System is the host's real network.
var System = Env{Addrs: interfaceAddrs, Route: route, Lookup: lookup}

// defaultRouteProbe are documentation addresses (RFC 5737, RFC 3849): the
// kernel finds the default route to them, and nothing is ever sent.
var defaultRouteProbe = map[Family]netip.Addr{
	IPv4: netip.MustParseAddr("192.0.2.1"),
	IPv6: netip.MustParseAddr("2001:db8::1"),
}

// ErrNoAddress is wrapped by Choose's error when the host has no address
// peers could use.
var ErrNoAddress = errors.New("no usable address to publish")

// Choose picks the address of family f to publish, given the host:port or
// host addresses of the peers this agent will contact (join addresses and
// the members it last knew). Peers that do not resolve are skipped.
func (e Env) Choose(f Family, peers []string) (Choice, error) {
	var peerIPs []netip.Addr
	for _, p := range peers {
		host := p
		if h, _, err := net.SplitHostPort(p); err == nil {
			host = h
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			peerIPs = append(peerIPs, ip.Unmap())
			continue
		}
		if e.Lookup == nil {
			continue
		}
		ips, err := e.Lookup(host)
		if err != nil {
			continue
		}
		for _, ip := range ips {
			peerIPs = append(peerIPs, ip.Unmap())
		}
	}
	usable := func(ip netip.Addr) bool {
		return ip.IsValid() && FamilyOf(ip) == f && !ip.IsLoopback() && !ip.IsUnspecified() &&
			!ip.IsLinkLocalUnicast() && !ip.IsMulticast()
	}
	if e.Route != nil {
		for _, p := range peerIPs {
			if FamilyOf(p) != f || p.IsLoopback() || p.IsUnspecified() {
				continue
			}
			if src, err := e.Route(p); err == nil && usable(src.Unmap()) {
				return Choice{Addr: src.Unmap(), Reason: "the address of the route to peer " + p.String()}, nil
			}
		}
		if src, err := e.Route(defaultRouteProbe[f]); err == nil && usable(src.Unmap()) {
			return Choice{Addr: src.Unmap(), Reason: "the address of the default route"}, nil
		}
	}
	var addrs []netip.Addr
	if e.Addrs != nil {
		var err error
		if addrs, err = e.Addrs(); err != nil {
			return Choice{}, fmt.Errorf("netaddr: list interface addresses: %w", err)
		}
	}
	for _, ip := range addrs {
		if ip = ip.Unmap(); usable(ip) && ip.IsPrivate() {
			return Choice{Addr: ip, Reason: "the first private address of an interface"}, nil
		}
	}
	for _, ip := range addrs {
		if ip = ip.Unmap(); usable(ip) && ip.IsGlobalUnicast() {
			return Choice{Addr: ip, Reason: "the first global address of an interface"}, nil
		}
	}
	outside := false
	for _, p := range peerIPs {
		if !p.IsLoopback() {
			outside = true
		}
	}
	for _, ip := range addrs {
		if ip = ip.Unmap(); FamilyOf(ip) == f && ip.IsLoopback() && !outside {
			return Choice{Addr: ip, Reason: "loopback: this host has no other " + f.String() + " address"}, nil
		}
	}
	if outside {
		return Choice{}, fmt.Errorf("netaddr: %w: this host has no %s address other than loopback, and the peers to join are not on loopback", ErrNoAddress, f)
	}
	return Choice{}, fmt.Errorf("netaddr: %w: this host has no %s address", ErrNoAddress, f)
}

// IsWildcard reports whether host (an IP literal, or "" which listeners
// treat as every address) listens on every address.
func IsWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

func interfaceAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	return out, nil
}

// route asks the kernel for the source address towards dst by connecting
// a UDP socket: connect only consults the routing table, it sends nothing.
func route(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

func lookup(host string) ([]netip.Addr, error) {
	r := net.Resolver{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.LookupNetIP(ctx, "ip", host)
}
