package netaddr

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func addrs(ss ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
}

// routes maps destination prefixes to source addresses, like a routing
// table; no match is "network is unreachable".
func routes(table map[string]string) func(netip.Addr) (netip.Addr, error) {
	return func(dst netip.Addr) (netip.Addr, error) {
		best, bits := netip.Addr{}, -1
		for p, src := range table {
			pf := netip.MustParsePrefix(p)
			if pf.Contains(dst) && pf.Bits() > bits {
				best, bits = netip.MustParseAddr(src), pf.Bits()
			}
		}
		if bits < 0 {
			return netip.Addr{}, errors.New("network is unreachable")
		}
		return best, nil
	}
}

func TestChoose(t *testing.T) {
	cases := []struct {
		name   string
		env    Env
		f      Family
		peers  []string
		want   string
		reason string
	}{
		{
			// The field failure: loopback sorts first, 192.168 must win.
			name:   "lan without default route, no peers",
			env:    Env{Addrs: addrs("127.0.0.1", "192.168.77.1"), Route: routes(map[string]string{"192.168.77.0/24": "192.168.77.1"})},
			f:      IPv4,
			want:   "192.168.77.1",
			reason: "private",
		},
		{
			name: "route to the join peer beats the first private address",
			env: Env{Addrs: addrs("127.0.0.1", "172.17.0.1", "192.168.1.5"), Route: routes(map[string]string{
				"172.17.0.0/16": "172.17.0.1", "192.168.1.0/24": "192.168.1.5"})},
			f:      IPv4,
			peers:  []string{"192.168.1.9:7946"},
			want:   "192.168.1.5",
			reason: "route to peer 192.168.1.9",
		},
		{
			name: "default route beats the first private address",
			env: Env{Addrs: addrs("127.0.0.1", "172.17.0.1", "10.0.0.5"), Route: routes(map[string]string{
				"172.17.0.0/16": "172.17.0.1", "0.0.0.0/0": "10.0.0.5"})},
			f:      IPv4,
			want:   "10.0.0.5",
			reason: "default route",
		},
		{
			name:   "a loopback join peer does not pick loopback",
			env:    Env{Addrs: addrs("127.0.0.1", "192.168.77.2"), Route: routes(map[string]string{"127.0.0.0/8": "127.0.0.1"})},
			f:      IPv4,
			peers:  []string{"127.0.0.1:7946"},
			want:   "192.168.77.2",
			reason: "private",
		},
		{
			name:   "public address only",
			env:    Env{Addrs: addrs("127.0.0.1", "fe80::1", "198.51.100.7")},
			f:      IPv4,
			want:   "198.51.100.7",
			reason: "global",
		},
		{
			name:   "loopback-only host, one-host cluster",
			env:    Env{Addrs: addrs("127.0.0.1", "::1")},
			f:      IPv4,
			peers:  []string{"127.0.0.1:7950"},
			want:   "127.0.0.1",
			reason: "loopback",
		},
		{
			name:   "IPv6",
			env:    Env{Addrs: addrs("::1", "127.0.0.1", "192.168.1.5", "fd00::5")},
			f:      IPv6,
			want:   "fd00::5",
			reason: "private",
		},
		{
			name: "peer names resolve",
			env: Env{Addrs: addrs("127.0.0.1", "10.1.0.1", "10.2.0.1"),
				Route:  routes(map[string]string{"10.1.0.0/16": "10.1.0.1", "10.2.0.0/16": "10.2.0.1"}),
				Lookup: func(string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.2.0.9")}, nil }},
			f:      IPv4,
			peers:  []string{"n2.example:7946"},
			want:   "10.2.0.1",
			reason: "route to peer 10.2.0.9",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.env.Choose(c.f, c.peers)
			if err != nil {
				t.Fatal(err)
			}
			if got.Addr.String() != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Fatalf("Choose = %v (%s), want %s (%s)", got.Addr, got.Reason, c.want, c.reason)
			}
		})
	}
}

func TestChooseRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		env   Env
		peers []string
	}{
		"loopback only, peer outside": {Env{Addrs: addrs("127.0.0.1")}, []string{"192.168.1.9:7946"}},
		"no address at all":           {Env{Addrs: addrs()}, nil},
		"link-local only":             {Env{Addrs: addrs("169.254.3.4")}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := c.env.Choose(IPv4, c.peers)
			if !errors.Is(err, ErrNoAddress) {
				t.Fatalf("Choose = %v, %v; want ErrNoAddress", got, err)
			}
		})
	}
}

func TestIsWildcard(t *testing.T) {
	for host, want := range map[string]bool{"": true, "0.0.0.0": true, "::": true, "127.0.0.1": false, "192.168.1.1": false, "name": false} {
		if IsWildcard(host) != want {
			t.Errorf("IsWildcard(%q) = %v", host, !want)
		}
	}
}

// TestSystem runs the real lookup on this machine: whatever it picks must
// not be loopback while the machine has another address.
func TestSystem(t *testing.T) {
	all, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	other := false
	for _, a := range all {
		if a.Is4() && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			other = true
		}
	}
	got, err := System.Choose(IPv4, nil)
	if err != nil {
		if other {
			t.Fatalf("Choose on a host with %v: %v", all, err)
		}
		t.Skipf("no IPv4 address here: %v", err)
	}
	if other && got.Addr.IsLoopback() {
		t.Fatalf("Choose picked %v (%s) on a host with %v", got.Addr, got.Reason, all)
	}
	t.Logf("picked %v: %s", got.Addr, got.Reason)
}
