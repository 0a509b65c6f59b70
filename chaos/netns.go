package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/conclave-agent/conclave/internal/netns"
)

// Network namespaces, when the harness runs as root and finds ip and
// iptables: one "host" per agent (internal/netns: its own loopback and a
// 192.168.78.x address on a bridge in a hub namespace of ours, nothing in
// the caller's namespace), the same ports on every host, wildcard binds and
// no advertise keys, as an operator deploys on a LAN. Faults are iptables
// DROP rules inside the agents' namespaces. Namespace names carry the
// harness's pid, so two runs at once keep apart, and a run removes only the
// leftovers of harnesses that no longer exist.
const (
	nsPrefix = "cvchaos"
	subnet   = "192.168.78"
)

type netnsHosts struct {
	*netns.Net
	names []string
}

// netnsAvailable says whether network faults can run, and if not, why.
func netnsAvailable(uid int) (bool, string) {
	if uid != 0 {
		return false, "not running as root"
	}
	if ok, why := netns.Available(); !ok {
		return false, why
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return false, "iptables not found"
	}
	return true, ""
}

// setupNetns builds the hosts for names.
func setupNetns(ctx context.Context, names []string) (*netnsHosts, error) {
	n, err := netns.Setup(ctx, nsPrefix, subnet, names)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &netnsHosts{Net: n, names: names}, nil
}

func (n *netnsHosts) ip(name string) string { return n.Host(name).IP }

// drop makes to's namespace drop every packet from from (one direction).
func (n *netnsHosts) drop(ctx context.Context, from, to string) error {
	return n.Exec(ctx, to, "iptables", "-A", "INPUT", "!", "-i", "lo", "-s", n.ip(from), "-j", "DROP")
}

// loss makes name's namespace drop a random fraction p of what it receives.
func (n *netnsHosts) loss(ctx context.Context, name string, p float64) error {
	return n.Exec(ctx, name, "iptables", "-A", "INPUT", "!", "-i", "lo",
		"-m", "statistic", "--mode", "random", "--probability", fmt.Sprintf("%.2f", p), "-j", "DROP")
}

// partition cuts every link between the groups, both ways.
func (n *netnsHosts) partition(ctx context.Context, groups ...[]string) error {
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
func (n *netnsHosts) heal(ctx context.Context) error {
	var errs []error
	for _, name := range n.names {
		if err := n.Exec(ctx, name, "iptables", "-F", "INPUT"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
