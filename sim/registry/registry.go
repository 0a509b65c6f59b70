// Package registry names the election protocols the simulator can run, so
// the soak command and tests build them the same way. It builds every
// instance through core.NewProtocol, the factory the agent uses; it must
// never change a protocol's behaviour except through the protocol's own
// documented options.
package registry

import (
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/sim"
)

// Entry is one simulated protocol: how to build it and which invariants it
// promises.
type Entry struct {
	// Factory builds instances with the protocol's production options.
	Factory sim.Factory
	// Checks returns the invariants to enforce for a given election
	// timeout.
	Checks func(electionTimeout time.Duration) sim.Checks
}

var entries = map[string]Entry{
	"majority": {Factory: Majority(majority.Unsafe{}), Checks: sim.AllChecks},
	"bully":    {Factory: Bully(), Checks: sim.NoLeaseChecks},
	"ring":     {Factory: Ring(ring.AlgLCR), Checks: sim.NoLeaseChecks},
	"ring-hs":  {Factory: Ring(ring.AlgHS), Checks: sim.NoLeaseChecks},
}

// Names lists the registered protocols, sorted.
func Names() []string {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the entry registered under name.
func Lookup(name string) (Entry, error) {
	e, ok := entries[name]
	if !ok {
		return Entry{}, fmt.Errorf("registry: unknown protocol %q (have %v)", name, Names())
	}
	return e, nil
}

// Options returns sim options for the named protocol with every other field
// at its default.
func Options(name string) (sim.Options, error) {
	e, err := Lookup(name)
	if err != nil {
		return sim.Options{}, err
	}
	o := sim.Options{Factory: e.Factory, ElectionTimeout: 100 * time.Millisecond}
	o.Checks = e.Checks(o.ElectionTimeout)
	return o, nil
}

// spec is the core's protocol spec for a simulated node: the agent's
// production settings (PreVote, check-quorum and preemption on).
func spec(c sim.NodeConfig, protocol string) core.ProtocolSpec {
	return core.ProtocolSpec{
		Protocol:          protocol,
		Self:              c.Self,
		Members:           c.Members,
		ElectionTimeout:   c.ElectionTimeout,
		HeartbeatInterval: c.HeartbeatInterval,
		PreVote:           true,
		CheckQuorum:       true,
		Preempt:           true,
		MaxClockDrift:     c.MaxClockDrift,
		HardState:         c.HardState,
		Now:               c.Now,
		Rand:              c.Rand,
		Candidacy:         c.Candidacy,
		PreemptDelay:      3 * c.ElectionTimeout,
	}
}

// Majority builds majority nodes with PreVote and check-quorum, every voter
// member a voter, and the given deliberately broken variants (zero for
// the real protocol).
func Majority(unsafe majority.Unsafe) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		s := spec(c, core.ProtocolMajority)
		for _, m := range c.Members {
			if m.Voter {
				s.Voters = append(s.Voters, m.Name)
			}
		}
		s.MajorityUnsafe = unsafe
		return core.NewProtocol(s)
	}
}

// Bully builds bully nodes with their default (preempting) behaviour.
func Bully() sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		return core.NewProtocol(spec(c, core.ProtocolBully))
	}
}

// Ring builds ring nodes running the given algorithm (ring.AlgLCR or
// ring.AlgHS).
func Ring(algorithm string) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		s := spec(c, core.ProtocolRing)
		s.RingAlgorithm = algorithm
		return core.NewProtocol(s)
	}
}
