package core

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/protocols/ring"
)

// Protocol names, as in the election.protocol setting.
const (
	ProtocolMajority = "majority"
	ProtocolBully    = "bully"
	ProtocolRing     = "ring"
)

// ProtocolSpec is everything that builds one election protocol instance.
type ProtocolSpec struct {
	// Protocol is ProtocolMajority, ProtocolBully or ProtocolRing.
	Protocol string
	// RingAlgorithm is ring.AlgLCR, ring.AlgHS or ring.AlgPeterson (ring
	// only).
	RingAlgorithm string
	// Self is this node; Members the members known at start (Self may be
	// among them).
	Self    protocols.Member
	Members []protocols.Member
	// Voters bootstraps majority's voter configuration when the persisted
	// state holds none.
	Voters            []string
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	// PreVote and CheckQuorum are majority's; Preempt is bully's.
	PreVote, CheckQuorum, Preempt bool
	// Candidacy is the node's candidacy at start (protocols.CandidacySetter).
	// PreemptDelay is how long a reachable, eligible voter of higher
	// priority must be stable before a majority leader hands over to it,
	// and how long a bully or ring member of higher rank must have been up
	// and eligible before it takes over from a live leader.
	Candidacy    protocols.Candidacy
	PreemptDelay time.Duration
	// MaxClockDrift is the clock-rate drift majority's lease tolerates.
	MaxClockDrift float64
	HardState     protocols.HardState
	Now           protocols.Time
	Rand          *rand.Rand
	Logger        protocols.Logger
	// MajorityUnsafe plants deliberate bugs in majority (simulator tests
	// of the checker only).
	MajorityUnsafe majority.Unsafe
}

// NewProtocol builds the election a spec names. It is the only place that
// switches on the protocol's name: the agent and the simulator both build
// their instances here, so what the simulator proves is what runs.
func NewProtocol(s ProtocolSpec) (protocols.Protocol, error) {
	members := s.Members
	if len(members) == 0 {
		members = []protocols.Member{s.Self}
	}
	var (
		p   protocols.Protocol
		err error
	)
	switch s.Protocol {
	case ProtocolMajority:
		unsafe := s.MajorityUnsafe
		if unsafe == (majority.Unsafe{}) {
			unsafe = plantedMajority()
		}
		p, err = majority.New(majority.Config{
			ID: s.Self.ID, Members: members, Voters: s.Voters,
			ElectionTimeout: s.ElectionTimeout, HeartbeatInterval: s.HeartbeatInterval,
			PreVote: s.PreVote, CheckQuorum: s.CheckQuorum, MaxClockDrift: s.MaxClockDrift,
			Candidacy: s.Candidacy, PreemptDelay: s.PreemptDelay,
			HardState: s.HardState, Now: s.Now, Rand: s.Rand, Logger: s.Logger, Unsafe: unsafe,
		})
	case ProtocolBully:
		p, err = bully.New(bully.Config{
			ID: s.Self.ID, Members: members, ElectionTimeout: s.ElectionTimeout, HeartbeatInterval: s.HeartbeatInterval,
			NoPreempt: !s.Preempt, Candidacy: s.Candidacy, PreemptDelay: s.PreemptDelay,
			HardState: s.HardState, Now: s.Now, Rand: s.Rand, Logger: s.Logger,
		})
	case ProtocolRing:
		p, err = ring.New(ring.Config{
			ID: s.Self.ID, Members: members, ElectionTimeout: s.ElectionTimeout, HeartbeatInterval: s.HeartbeatInterval,
			Algorithm: s.RingAlgorithm, Candidacy: s.Candidacy, PreemptDelay: s.PreemptDelay,
			HardState: s.HardState, Now: s.Now, Rand: s.Rand, Logger: s.Logger,
		})
	default:
		err = fmt.Errorf("unknown protocol %q", s.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("core: election: %w", err)
	}
	return p, nil
}

// traits is what the core needs to know of a protocol besides its
// instance. traitsOf and NewProtocol are the only places that read the
// protocol's name: everything else in the core asks these.
type traits struct {
	// gossipObservers: observers learn the leader from gossiped
	// announcements when the cluster gossips (protocols/observe).
	gossipObservers bool
	// settings is the settings digest's SETTINGS part, ext its
	// extension ("" for none; docs/voters.md).
	settings func(ProtocolSpec) string
	ext      func(ProtocolSpec) string
}

func traitsOf(protocol string) traits {
	noExt := func(ProtocolSpec) string { return "" }
	switch protocol {
	case ProtocolMajority:
		return traits{gossipObservers: true,
			settings: func(e ProtocolSpec) string { return fmt.Sprintf("majority et=%v", e.ElectionTimeout) },
			ext: func(e ProtocolSpec) string {
				return "pv=" + boolDigit(e.PreVote) + " cq=" + boolDigit(e.CheckQuorum)
			}}
	case ProtocolRing:
		return traits{settings: func(e ProtocolSpec) string { return "ring alg=" + e.RingAlgorithm }, ext: noExt}
	default:
		return traits{settings: func(e ProtocolSpec) string { return e.Protocol }, ext: noExt}
	}
}

// PlantedBugs reports whether this binary was built with the
// conclave_unsafe tag, which plants a lease bug in majority for the chaos
// harness's own test: the agent says so loudly at start.
func PlantedBugs() bool { return plantedMajority() != (majority.Unsafe{}) }
