// Package netns builds throw-away "hosts" out of Linux network namespaces
// for tests and the chaos harness: one namespace per host, each with its
// own loopback and an eth0 whose peer end joins a bridge inside a hub
// namespace of ours. Nothing is created in, or changed about, the caller's
// own network namespace.
//
// Every namespace name starts with a prefix and the creating process's id
// (PREFIX-PID-NAME), so two runs at once never collide, and Cleanup removes
// only the leftovers of runs whose process is gone.
package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Available reports whether namespaces can be built here (root and the ip
// tool), and if not, why.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not running as root (network namespaces need CAP_SYS_ADMIN)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "the ip tool (iproute2) is not installed"
	}
	return true, ""
}

// Host is one namespace.
type Host struct {
	// Name is the caller's name for the host.
	Name string
	// NS is the namespace's name (for ip netns exec).
	NS string
	// IP is the host's address on the bridge.
	IP string
	// hubLink is the hub end of the host's veth pair.
	hubLink string
}

// Net is a set of hosts on one bridge.
type Net struct {
	prefix string // PREFIX-PID-
	hub    string
	hosts  map[string]*Host
	order  []string
}

// Setup builds one host per name on subnet (three octets, e.g.
// "192.168.77"), numbered from .1 in order. prefix names the user
// ("cvmh", "cvchaos"); it must not contain '-'.
func Setup(ctx context.Context, prefix, subnet string, names []string) (*Net, error) {
	if strings.Contains(prefix, "-") || prefix == "" {
		return nil, fmt.Errorf("netns: prefix %q must be non-empty and free of '-'", prefix)
	}
	if len(names) > 250 {
		return nil, fmt.Errorf("netns: %d hosts do not fit one /24", len(names))
	}
	if err := Cleanup(ctx, prefix); err != nil {
		return nil, err
	}
	n := &Net{prefix: fmt.Sprintf("%s-%d-", prefix, os.Getpid()), hosts: map[string]*Host{}}
	n.hub = n.prefix + "hub"
	steps := [][]string{
		{"ip", "netns", "add", n.hub},
		inNS(n.hub, "ip", "link", "add", "br0", "type", "bridge"),
		inNS(n.hub, "ip", "link", "set", "br0", "up"),
	}
	for i, name := range names {
		h := &Host{Name: name, NS: n.prefix + name, IP: fmt.Sprintf("%s.%d", subnet, i+1), hubLink: fmt.Sprintf("v%d", i+1)}
		n.hosts[name] = h
		n.order = append(n.order, name)
		steps = append(steps,
			[]string{"ip", "netns", "add", h.NS},
			inNS(h.NS, "ip", "link", "set", "lo", "up"),
			// Create the pair inside the host's namespace, then move the
			// hub end: it never exists in the caller's namespace.
			inNS(h.NS, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", h.hubLink),
			inNS(h.NS, "ip", "link", "set", h.hubLink, "netns", n.hub),
			inNS(h.NS, "ip", "addr", "add", h.IP+"/24", "dev", "eth0"),
			inNS(h.NS, "ip", "link", "set", "eth0", "up"),
			inNS(n.hub, "ip", "link", "set", h.hubLink, "master", "br0"),
			inNS(n.hub, "ip", "link", "set", h.hubLink, "up"),
		)
	}
	for _, s := range steps {
		if err := Run(ctx, s...); err != nil {
			_ = n.Close()
			return nil, fmt.Errorf("netns setup: %w", err)
		}
	}
	return n, nil
}

// Host returns the host called name, or nil.
func (n *Net) Host(name string) *Host { return n.hosts[name] }

// Hosts returns the hosts in the order given to Setup.
func (n *Net) Hosts() []*Host {
	out := make([]*Host, len(n.order))
	for i, name := range n.order {
		out[i] = n.hosts[name]
	}
	return out
}

// Command returns a command that runs argv inside host's namespace.
func (n *Net) Command(ctx context.Context, host string, argv ...string) *exec.Cmd {
	full := inNS(n.hosts[host].NS, argv...)
	return exec.CommandContext(ctx, full[0], full[1:]...)
}

// Exec runs argv inside host's namespace and waits for it.
func (n *Net) Exec(ctx context.Context, host string, argv ...string) error {
	return Run(ctx, inNS(n.hosts[host].NS, argv...)...)
}

// Unplug takes the hub end of host's link down, like a pulled cable at
// the switch: the host's packets vanish, nobody gets a FIN or an RST, and
// the host itself keeps its address.
func (n *Net) Unplug(ctx context.Context, host string) error {
	return Run(ctx, inNS(n.hub, "ip", "link", "set", n.hosts[host].hubLink, "down")...)
}

// Plug undoes Unplug.
func (n *Net) Plug(ctx context.Context, host string) error {
	return Run(ctx, inNS(n.hub, "ip", "link", "set", n.hosts[host].hubLink, "up")...)
}

// Close deletes every namespace of n (their veth ends and the bridge go
// with them).
func (n *Net) Close() error {
	var errs []error
	for _, name := range n.order {
		if err := del(n.hosts[name].NS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := del(n.hub); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func del(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return Run(context.Background(), "ip", "netns", "del", ns)
}

// Cleanup removes the namespaces of prefix whose creating process no
// longer exists.
func Cleanup(ctx context.Context, prefix string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("netns: ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if pid := ownedBy(prefix, f[0]); pid == 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		if err := Run(ctx, "ip", "netns", "del", f[0]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ownedBy returns the pid in a namespace name of prefix, or 0.
func ownedBy(prefix, ns string) int {
	rest, ok := strings.CutPrefix(ns, prefix+"-")
	if !ok {
		return 0
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(pid)
	if err != nil {
		return 0
	}
	return v
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func inNS(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// Run runs a command, at most 10 s, and returns its output in the error.
func Run(ctx context.Context, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
