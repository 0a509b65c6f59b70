// Package registry names the election protocols the simulator can run, so
// the soak command and tests build them the same way. It builds every
// instance through core.NewProtocol, the factory the agent uses; it must
// never change a protocol's behaviour except through the protocol's own
// documented options.
package registry

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/config"
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
	// Core, when set, runs the protocol inside core.Node (sim core
	// mode) instead of Factory.
	Core sim.CoreFactory
	// FailoverETs is core mode's failover bound in election timeouts.
	FailoverETs int
	// Elections, when set, declares the named elections every node runs
	// beside the default one (sim.Options.Elections), for an election
	// timeout; the failover probe is then off.
	Elections func(electionTimeout time.Duration) []sim.ElectionSpec
}

var entries = map[string]Entry{
	"majority":      {Factory: Majority(majority.Unsafe{}), Checks: sim.AllChecks},
	"bully":         {Factory: Bully(), Checks: sim.NoLeaseChecks},
	"ring":          {Factory: Ring(ring.AlgLCR), Checks: sim.NoLeaseChecks},
	"ring-hs":       {Factory: Ring(ring.AlgHS), Checks: sim.NoLeaseChecks},
	"ring-peterson": {Factory: Ring(ring.AlgPeterson), Checks: sim.NoLeaseChecks},

	"core-majority":      {Core: Core(core.ProtocolMajority, "", core.Unsafe{}), Checks: sim.AllChecks, FailoverETs: majorityFailoverETs},
	"core-bully":         {Core: Core(core.ProtocolBully, "", core.Unsafe{}), Checks: sim.NoLeaseChecks, FailoverETs: StrictFailoverETs},
	"core-ring":          {Core: Core(core.ProtocolRing, ring.AlgLCR, core.Unsafe{}), Checks: sim.NoLeaseChecks, FailoverETs: ringFailoverETs},
	"core-ring-hs":       {Core: Core(core.ProtocolRing, ring.AlgHS, core.Unsafe{}), Checks: sim.NoLeaseChecks, FailoverETs: ringFailoverETs},
	"core-ring-peterson": {Core: Core(core.ProtocolRing, ring.AlgPeterson, core.Unsafe{}), Checks: sim.NoLeaseChecks, FailoverETs: ringFailoverETs},

	MultiVariant: {Core: Core(core.ProtocolMajority, "", core.Unsafe{}), Checks: sim.AllChecks, Elections: MultiElections},
}

// Names lists the registered bare protocols (run from their Factory),
// sorted.
func Names() []string {
	names := make([]string, 0, len(entries))
	for n, e := range entries {
		if e.Core == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// CoreNames lists the registered core-mode variants (sim.Options.Core),
// sorted.
func CoreNames() []string {
	names := make([]string, 0, len(entries))
	for n, e := range entries {
		if e.Core != nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Lookup returns the entry registered under name.
func Lookup(name string) (Entry, error) {
	e, ok := entries[name]
	if !ok {
		return Entry{}, fmt.Errorf("registry: unknown protocol %q (have %v and %v)", name, Names(), CoreNames())
	}
	return e, nil
}

// Options returns sim options for the named protocol with every other field
// at its default, except that majority's faults include group pauses
// (sim.MajorityFaults).
func Options(name string) (sim.Options, error) {
	e, err := Lookup(name)
	if err != nil {
		return sim.Options{}, err
	}
	if e.Core != nil && e.Elections != nil {
		// The default election as core-majority's, without the probe.
		o := CoreOptions(e.Core, e.Checks, true, 0)
		o.Checks.Isolation = true
		o.Elections = e.Elections(o.ElectionTimeout)
		return o, nil
	}
	if e.Core != nil {
		return CoreOptions(e.Core, e.Checks, strings.HasSuffix(name, core.ProtocolMajority), e.FailoverETs), nil
	}
	o := sim.Options{Factory: e.Factory, ElectionTimeout: 100 * time.Millisecond}
	o.Checks = e.Checks(o.ElectionTimeout)
	if name == core.ProtocolMajority {
		o.Faults = sim.MajorityFaults()
	}
	return o, nil
}

// Core-mode bounds, in election timeouts of the agent's default (200 ms).
// Liveness after the heal must cover the membership model's rejoin lag
// (gossip declares a partitioned member dead and alive again seconds
// late). StrictFailoverETs ends the failover probe before the model's
// earliest death declaration (1.5 s), so a policy that waits for gossip
// fails it. Ring misses it in about a fifth of the schedules with the
// real policy, and its slowest probes took 7.8 s (docs/simulator.md,
// findings: a leader abdicates on a stale election message, and suspicions
// of a just-crashed or live member route elections badly until gossip or
// a leadership change settles them), so ring gets the liveness bound: it
// still fails a policy that never recovers.
const (
	coreLivenessETs   = 60
	StrictFailoverETs = 7
	ringFailoverETs   = 60
	// Majority's failover does not wait for phi or gossip (its election
	// timers do), but a run of split votes can outlast the strict bound:
	// 3 of 50,000 probes did with four voters, three left to agree
	// unanimously (docs/simulator.md, finding 6).
	majorityFailoverETs = 60
)

// CoreOptions returns core-mode options with the agent's default timings
// (config.Default: election timeout, heartbeat interval), the membership
// faults and the failover probe on with a bound of failoverETs election
// timeouts. Majority runs with two observers, so that the observers'
// gossip path runs too and clusters of 3, 5 and 7 nodes have an odd number
// of voters (1, 3, 5), as deployments do, and with group pauses
// (sim.MajorityFaults), which line its election timers up.
func CoreOptions(f sim.CoreFactory, checks func(time.Duration) sim.Checks, observers bool, failoverETs int) sim.Options {
	d := config.Default()
	o := sim.Options{
		Core:              f,
		ElectionTimeout:   d.Election.ElectionTimeout.Std(),
		HeartbeatInterval: d.Detector.HeartbeatInterval.Std(),
		Faults:            sim.CoreFaults(),
	}
	if observers {
		o.Observers = 2
		o.Faults = append(o.Faults, sim.FaultPauseGroup)
	}
	o.Checks = checks(o.ElectionTimeout)
	o.Checks.LivenessBound = coreLivenessETs * o.ElectionTimeout
	o.Checks.FailoverBound = time.Duration(failoverETs) * o.ElectionTimeout
	return o
}

// Core builds core-mode nodes of a protocol (ring: of algorithm) with the
// agent's production settings, its default phi detector, gossip on (the
// observers' path of majority) and the given planted policy bugs (zero
// for the real policy).
func Core(protocol, algorithm string, unsafe core.Unsafe) sim.CoreFactory {
	return func(c sim.NodeConfig) (core.Config, error) {
		cfg := nodeConfig(c, protocol, algorithm)
		cc, _ := core.ConfigFor(cfg, core.DefaultElection, coreStart(c))
		// The modelled clocks drift by the run's bound, so the lease
		// tolerates that one.
		cc.Election.MaxClockDrift = c.MaxClockDrift
		cc.Unsafe = unsafe
		return cc, nil
	}
}

// coreStart is the core's start state of a simulated node.
func coreStart(c sim.NodeConfig) core.Start {
	return core.Start{
		HardState:   c.HardState,
		Now:         c.Now,
		Rand:        c.Rand,
		Gossip:      true,
		Maintenance: c.Candidacy.Ineligible,
	}
}

// nodeConfig is a simulated node's agent configuration: its default
// election runs protocol (ring: algorithm) with the agent's production
// settings.
func nodeConfig(c sim.NodeConfig, protocol, algorithm string) config.Config {
	cfg := config.Default()
	cfg.Node.ID = uint64(c.Self.ID)
	cfg.Node.Name = c.Self.Name
	cfg.Node.Priority = int(c.Candidacy.Priority)
	cfg.Election.Protocol = protocol
	cfg.Election.RingAlgorithm = algorithm
	cfg.Election.Voters = nil
	if protocol == core.ProtocolMajority {
		cfg.Election.Voters = append([]string(nil), c.Voters...)
	}
	cfg.Election.ElectionTimeout = config.Duration(c.ElectionTimeout)
	cfg.Detector.HeartbeatInterval = config.Duration(c.HeartbeatInterval)
	cfg.Election.PreVote, cfg.Election.CheckQuorum, cfg.Election.Preempt = true, true, true
	cfg.Election.PreemptDelay = config.Duration(simPreemptDelay(c.ElectionTimeout))
	return cfg
}

// simPreemptDelay is the preemption delay of simulated nodes: three
// election timeouts, short enough that preferred-leader checks settle
// within a schedule's quiet phase.
func simPreemptDelay(et time.Duration) time.Duration { return 3 * et }

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
		PreemptDelay:      simPreemptDelay(c.ElectionTimeout),
	}
}

// Majority builds majority nodes with PreVote and check-quorum, every voter
// member a voter, and the given deliberately broken variants (zero for
// the real protocol).
func Majority(unsafe majority.Unsafe) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		s := spec(c, core.ProtocolMajority)
		s.Voters = append([]string(nil), c.Voters...)
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

// Ring builds ring nodes running the given algorithm (ring.AlgLCR,
// ring.AlgHS or ring.AlgPeterson).
func Ring(algorithm string) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		s := spec(c, core.ProtocolRing)
		s.RingAlgorithm = algorithm
		return core.NewProtocol(s)
	}
}
