package sim

import (
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// NodeConfig is what a Factory gets to build one protocol instance: at the
// start of a run and again at every restart.
type NodeConfig struct {
	// Self is the node being built.
	Self protocols.Member
	// Members lists every node of the cluster, Self included, in id order.
	Members []protocols.Member
	// Voters names the nodes that start as voters: every member but the
	// last Options.Observers.
	Voters []string
	// HardState is the node's persisted state: zero at the start of a run,
	// the last persisted HardState on restart.
	HardState protocols.HardState
	// Now is the node's local clock reading at creation.
	Now protocols.Time
	// Rand is the instance's own generator, seeded from the run's generator.
	Rand *rand.Rand
	// Candidacy is the node's eligibility and priority at creation (health
	// schedules; zero otherwise). Later changes arrive through
	// protocols.CandidacySetter.
	Candidacy protocols.Candidacy
	// ElectionTimeout, HeartbeatInterval and MaxClockDrift are the run's
	// Options, so protocol and nemesis agree on the time scale and the drift
	// bound.
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	MaxClockDrift     float64
}

// Factory builds a protocol instance. It is called from the run's single
// goroutine and must be deterministic given its NodeConfig.
type Factory func(cfg NodeConfig) (protocols.Protocol, error)

// Checks selects the invariants the checker enforces. EpochMonotonic,
// SingleLeaderPerEpoch, AgreeOnLeaderOfEpoch and Fencing hold for every
// protocol; Lease only for majority; see AllChecks and NoLeaseChecks.
type Checks struct {
	// SingleLeaderPerEpoch: no two nodes ever report Role==Leader with the
	// same epoch.
	SingleLeaderPerEpoch bool
	// AgreeOnLeaderOfEpoch: every node that reports a Leader for an epoch
	// reports the same one (and it is the node that led that epoch).
	AgreeOnLeaderOfEpoch bool
	// EpochMonotonic: a node's Status.Epoch never decreases, across restarts
	// too.
	EpochMonotonic bool
	// Fencing: the fenced resource, which accepts a leader's write only if
	// its epoch is at least the highest accepted so far, never accepts
	// writes from two different leaders under the same epoch.
	Fencing bool
	// Lease: at most one node reports Role==Leader at any instant of global
	// time (each node's Status evaluated at its own local time).
	Lease bool
	// VoteOncePerTerm: no node ever grants its vote (sends MsgVoteResp
	// without Reject) to two different candidates in the same term, across
	// restarts too. For vote-based protocols (majority).
	VoteOncePerTerm bool
	// Configurations checks the voter configurations nodes report in
	// Status (majority; others report none): no two nodes hold different
	// voters under one version, committed configurations never disagree
	// at an index and each differs from the previous by at most one voter,
	// and every new leader holds a configuration at least as new as every
	// committed one.
	Configurations bool
	// Health: no node is given leadership (announces Role==Leader in a
	// SoftState) while it is ineligible, and the leader that liveness
	// waits for must be eligible (sim/health.go).
	Health bool
	// LivenessBound: once every fault is healed, within this much virtual
	// time some node must lead and every node's Status must name it and its
	// epoch. Zero disables the liveness check.
	LivenessBound time.Duration
	// Settle: once liveness after the heal is reached, the run goes on
	// for this much virtual time, fault-free, instead of ending there
	// (bully and ring, whose members of higher rank take over from a
	// live leader only once stable for their preempt delay: set it above
	// that delay). Zero ends the run at liveness. In core mode it is
	// skipped while FailoverBound is set.
	Settle time.Duration
	// Preferred: at the end of Settle every live node must follow the
	// live, eligible node of highest rank (Schedule.Priorities, then id;
	// sim/preferred.go).
	Preferred bool
	// Isolation: while one node is crashed or paused by a single fault
	// and the rest of the network is intact, the leader of an election
	// that node does not lead keeps leading it in the same epoch
	// (docs/simulator.md, "Several elections per node"). Majority only:
	// its leader needs a quorum of voters, not every member.
	Isolation bool
	// SessionLeader (a named election whose candidacy sessions hold;
	// Options.Elections): no node becomes leader, leading an epoch it
	// did not lead before, while it holds no session; and after the heal
	// the one node given the only session leads (sessions.go).
	SessionLeader bool
	// FailoverBound (core mode only): once liveness after the heal is
	// reached, the leader resigns and the next node to claim leadership
	// is crashed for good right after its claim went out; within this
	// much virtual time every live node must follow one live leader. Set
	// below the membership model's earliest death declaration, it fails
	// any policy that waits for gossip to declare a dead leader dead.
	// Zero disables the probe.
	FailoverBound time.Duration
}

// AllChecks enables every invariant, including the lease and one vote per
// term, with a liveness bound of 30 election timeouts. Use it for majority.
func AllChecks(electionTimeout time.Duration) Checks {
	return Checks{
		SingleLeaderPerEpoch: true,
		AgreeOnLeaderOfEpoch: true,
		EpochMonotonic:       true,
		Fencing:              true,
		Lease:                true,
		VoteOncePerTerm:      true,
		Configurations:       true,
		LivenessBound:        30 * electionTimeout,
	}
}

// NoLeaseChecks is AllChecks without the lease and the vote check: for
// protocols (bully, ring) that may let two leaders of different epochs
// coexist under partition.
func NoLeaseChecks(electionTimeout time.Duration) Checks {
	c := AllChecks(electionTimeout)
	c.Lease, c.VoteOncePerTerm = false, false
	return c
}

// Options configures runs. Zero durations and probabilities take the
// defaults documented on each field.
type Options struct {
	// Factory builds the protocol instances. Required unless Core is set.
	Factory Factory
	// Core, when set, runs every node as a core.Node, the agent's pure
	// driver, instead of a bare protocol from Factory: real phi detectors,
	// the membership model of membermodel.go and a transport peer table
	// (docs/simulator.md, "Core mode"). SuspectAfter and DownAfter are
	// then unused.
	Core CoreFactory
	// Checks are the invariants to enforce. The zero value checks nothing;
	// use AllChecks or NoLeaseChecks.
	Checks Checks
	// Nodes fixes the cluster size; zero lets RandomSchedule pick 3, 5 or 7.
	Nodes int
	// TickInterval is how often, on its own local clock, each node is
	// ticked. Default 10ms.
	TickInterval time.Duration
	// ElectionTimeout is handed to the Factory and scales every fault
	// duration. Default 100ms.
	ElectionTimeout time.Duration
	// HeartbeatInterval is handed to the Factory. Default ElectionTimeout/4.
	HeartbeatInterval time.Duration
	// MaxClockDrift bounds every node's clock rate to [1-d, 1+d]; the
	// protocol gets the same bound. Default 0.005; negative means no drift.
	MaxClockDrift float64
	// FaultPhaseMin and FaultPhaseMax bound the random length of the fault
	// phase. Defaults 20 and 60 election timeouts.
	FaultPhaseMin, FaultPhaseMax time.Duration
	// Faults lists the fault kinds RandomSchedule may use. Nil means every
	// kind in ScheduledFaults.
	Faults []FaultKind
	// Observers is how many nodes (those with the highest ids) start as
	// non-voters (left out of NodeConfig.Voters); at least one node
	// stays a voter. Only majority reads it; voter changes promote them.
	Observers int
	// NoMessageFaults keeps RandomSchedule from choosing drop and
	// duplication probabilities (delays and reordering remain).
	NoMessageFaults bool
	// SuspectAfter: a node gets Suspect(peer, true) once the peer has been
	// unreachable (crashed, paused, or its link to the node cut) this long,
	// and Suspect(peer, false) when it is reachable again. Default one
	// election timeout; negative disables suspicion inputs.
	SuspectAfter time.Duration
	// DownAfter: likewise MemberDown / MemberUp, modelling gossip. Default
	// five election timeouts; negative disables them.
	DownAfter time.Duration
	// Elections (core mode only) are named elections every node runs
	// beside the default one, over the same membership model, network
	// and transport peer table (elections.go). The failover probe and
	// Checks.Settle are then off: the run ends when every election is
	// live after the heal.
	Elections []ElectionSpec
	// AddressFaultOdds: Run draws each address fault Faults names
	// (FaultWipedRestart, FaultSeedSplit) with probability one in
	// AddressFaultOdds. Default 4; the regression seeds found at 2 keep
	// it.
	AddressFaultOdds int
	// ShellBugs plants deliberate bugs in the simulator's shell
	// (simulator tests only).
	ShellBugs ShellBugs
	// TraceLen is how many trailing events a Violation carries. Default 300.
	TraceLen int
	// Trace, when set, receives every event of the run, one line each.
	Trace io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.Factory == nil && o.Core == nil {
		return o, errors.New("sim: Options.Factory or Options.Core is required")
	}
	if o.MaxClockDrift >= 0.5 {
		return o, errors.New("sim: MaxClockDrift must be below 0.5")
	}
	if o.Nodes < 0 || o.Nodes > 64 {
		return o, errors.New("sim: Nodes must be between 1 and 64")
	}
	if err := validateElections(o); err != nil {
		return o, err
	}
	o = o.fill()
	if o.Core != nil {
		// The core's own detectors and the membership model replace the
		// oracle.
		o.SuspectAfter, o.DownAfter = -1, -1
	}
	return o, nil
}

// fill sets every zero field to its default.
func (o Options) fill() Options {
	if o.TickInterval <= 0 {
		o.TickInterval = 10 * time.Millisecond
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = 100 * time.Millisecond
	}
	if o.AddressFaultOdds <= 0 {
		o.AddressFaultOdds = 4
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = o.ElectionTimeout / 4
	}
	switch {
	case o.MaxClockDrift == 0:
		o.MaxClockDrift = 0.005
	case o.MaxClockDrift < 0:
		o.MaxClockDrift = 0
	}
	if o.FaultPhaseMin <= 0 {
		o.FaultPhaseMin = 20 * o.ElectionTimeout
	}
	if o.FaultPhaseMax < o.FaultPhaseMin {
		o.FaultPhaseMax = max(60*o.ElectionTimeout, o.FaultPhaseMin)
	}
	if o.Faults == nil {
		o.Faults = ScheduledFaults()
	}
	if o.SuspectAfter == 0 {
		o.SuspectAfter = o.ElectionTimeout
	}
	if o.DownAfter == 0 {
		o.DownAfter = 5 * o.ElectionTimeout
	}
	if o.TraceLen <= 0 {
		o.TraceLen = 300
	}
	return o
}
