package main

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

// Network namespaces, when the harness runs as root and finds ip and
// iptables: one namespace per agent (cvchaos-PID-NAME) with a veth pair
// whose other end joins a bridge inside a hub namespace of our own
// (cvchaos-PID-hub). Nothing touches the host's own network namespace, and
// every address is 10.77.0.0/24 inside those namespaces. Faults are
// iptables DROP rules inside the agents' namespaces. PID is the harness's
// process id, so two runs at once keep apart, and a run removes only the
// leftovers of harnesses that no longer exist.
const (
	nsPrefix = "cvchaos-"
	subnet   = "10.77.0"
)

var (
	nsRun = fmt.Sprintf("%s%d-", nsPrefix, os.Getpid())
	nsHub = nsRun + "hub"
)

type netns struct {
	names []string          // agent names
	ip    map[string]string // agent name → 10.77.0.x
}

func nsOf(name string) string { return nsRun + name }

// ownedBy returns the pid in a namespace name of ours, or 0.
func ownedBy(ns string) int {
	rest, ok := strings.CutPrefix(ns, nsPrefix)
	if !ok {
		return 0
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return 0
	}
	return n
}

// alive says whether process pid exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
}

// netnsAvailable says whether network faults can run, and if not, why.
func netnsAvailable(uid int) (bool, string) {
	if uid != 0 {
		return false, "not running as root"
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool + " not found"
		}
	}
	return true, ""
}

func sh(ctx context.Context, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func inNS(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// cleanupNetns removes this run's namespaces and the leftovers of runs
// whose harness is gone. Deleting a namespace deletes its veth ends and the
// bridge with it.
func cleanupNetns(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if pid := ownedBy(f[0]); pid == 0 || (pid != os.Getpid() && alive(pid)) {
			continue
		}
		if err := sh(ctx, "ip", "netns", "del", f[0]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setupNetns builds the namespaces for names.
func setupNetns(ctx context.Context, names []string) (*netns, error) {
	if err := cleanupNetns(ctx); err != nil {
		return nil, err
	}
	n := &netns{names: names, ip: map[string]string{}}
	steps := [][]string{
		{"ip", "netns", "add", nsHub},
		inNS(nsHub, "ip", "link", "add", "br0", "type", "bridge"),
		inNS(nsHub, "ip", "link", "set", "br0", "up"),
	}
	for i, name := range names {
		ns := nsOf(name)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		n.ip[name] = ip
		hubEnd := fmt.Sprintf("v%d", i+1)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			inNS(ns, "ip", "link", "set", "lo", "up"),
			// Create the pair inside the agent's namespace, then move the
			// hub end: it never exists in the host's namespace.
			inNS(ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", hubEnd),
			inNS(ns, "ip", "link", "set", hubEnd, "netns", nsHub),
			inNS(ns, "ip", "addr", "add", ip+"/24", "dev", "eth0"),
			inNS(ns, "ip", "link", "set", "eth0", "up"),
			inNS(nsHub, "ip", "link", "set", hubEnd, "master", "br0"),
			inNS(nsHub, "ip", "link", "set", hubEnd, "up"),
		)
	}
	for _, s := range steps {
		if err := sh(ctx, s...); err != nil {
			_ = cleanupNetns(context.Background())
			return nil, fmt.Errorf("netns setup: %w", err)
		}
	}
	return n, nil
}

// drop makes to's namespace drop every packet from from (one direction).
func (n *netns) drop(ctx context.Context, from, to string) error {
	return sh(ctx, inNS(nsOf(to), "iptables", "-A", "INPUT", "!", "-i", "lo", "-s", n.ip[from], "-j", "DROP")...)
}

// loss makes name's namespace drop a random fraction p of what it receives.
func (n *netns) loss(ctx context.Context, name string, p float64) error {
	return sh(ctx, inNS(nsOf(name), "iptables", "-A", "INPUT", "!", "-i", "lo",
		"-m", "statistic", "--mode", "random", "--probability", fmt.Sprintf("%.2f", p), "-j", "DROP")...)
}

// partition cuts every link between the groups, both ways.
func (n *netns) partition(ctx context.Context, groups ...[]string) error {
	for i, a := range groups {
		for j, b := range groups {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					if err := n.drop(ctx, x, y); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// heal flushes every rule.
func (n *netns) heal(ctx context.Context) error {
	var errs []error
	for _, name := range n.names {
		if err := sh(ctx, inNS(nsOf(name), "iptables", "-F", "INPUT")...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
