package core

import (
	"math/rand/v2"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/protocols"
)

// DefaultMaxClockDrift is the clock-rate drift majority's lease tolerates
// when the shell runs on real clocks. NTP keeps them within a few hundred
// ppm; 1% is a wide margin. The simulator sets its own bound, the one its
// modelled clocks drift by.
const DefaultMaxClockDrift = 0.01

// Start is what a shell knows at start besides the configuration file:
// the persisted state, its clock and randomness, its published addresses,
// the one question it answers (Reachable) and the health facts it read
// from disk.
type Start struct {
	HardState protocols.HardState
	// ObservedEpoch is the last Ready.ObservedEpoch persisted (0: none).
	ObservedEpoch uint64
	Now           protocols.Time
	Rand          *rand.Rand
	// Logger receives the core's log lines, ProtocolLogger the
	// protocol's; nil discards them. The caller tags both with the
	// election's name: the core's lines do not repeat it.
	Logger         Logger
	ProtocolLogger protocols.Logger
	// Gossip says the cluster spreads gossip broadcasts (Config.Gossip).
	Gossip    bool
	Reachable func(protocols.ID) bool
	// GossipAddr and TransportAddr are the published addresses.
	GossipAddr, TransportAddr string
	// Maintenance is on when an operator asked for maintenance, or when
	// the maintenance record cannot be read: never lose such a request
	// silently.
	Maintenance bool
}

// ConfigFrom maps an agent's configuration and its start facts onto the
// core's Config. It is the one mapping: the agent builds its core here
// and the simulator's registry builds each simulated node's, so the
// settings the simulator proves are the ones the agent runs.
//
// The initial candidacy is decided here: an agent in maintenance, or
// with checks that have not passed yet, starts ineligible, so it never
// leads before its service is known healthy (docs/health.md).
func ConfigFrom(cfg config.Config, st Start) Config {
	c, _ := ConfigFor(cfg, DefaultElection, st)
	return c
}

// ConfigFor is ConfigFrom for the election called name (st holds that
// election's persisted state); ok is false when cfg runs no such election.
func ConfigFor(cfg config.Config, name string, st Start) (_ Config, ok bool) {
	el, ok := cfg.ElectionFor(name)
	if !ok {
		return Config{}, false
	}
	// Before cfg.Election is replaced: the anchor is found among the
	// configured elections.
	follows := el.Group != "" && cfg.GroupAnchor(el.Group) != name
	cfg.Node.Priority = cfg.PriorityFor(name)
	cfg.Election = el
	self := protocols.Member{
		ID:   protocols.ID(cfg.Node.ID),
		Name: cfg.Node.Name,
	}
	return Config{
		Name: name,
		Election: ProtocolSpec{
			Protocol:          cfg.Election.Protocol,
			RingAlgorithm:     cfg.Election.RingAlgorithm,
			Self:              self,
			Voters:            append([]string(nil), cfg.Election.Voters...),
			ElectionTimeout:   cfg.Election.ElectionTimeout.Std(),
			HeartbeatInterval: cfg.Detector.HeartbeatInterval.Std(),
			PreVote:           cfg.Election.PreVote,
			CheckQuorum:       cfg.Election.CheckQuorum,
			Preempt:           cfg.Election.Preempt,
			MaxClockDrift:     DefaultMaxClockDrift,
			HardState:         st.HardState,
			Now:               st.Now,
			Rand:              st.Rand,
			Logger:            st.ProtocolLogger,
			Candidacy:         startCandidacy(cfg, st.Maintenance, follows),
			PreemptDelay:      cfg.Election.PreemptDelay.Std(),
		},
		Detector:       cfg.Detector.PhiConfig(),
		Gossip:         st.Gossip,
		Reachable:      st.Reachable,
		Meta:           api.NewMeta(cfg.Node.Meta),
		GossipAddr:     st.GossipAddr,
		TransportAddr:  st.TransportAddr,
		Logger:         st.Logger,
		ObservedEpoch:  st.ObservedEpoch,
		ConfirmTimeout: cfg.Election.ElectionTimeout.Std(),
		Session: SessionPolicy{
			Required: cfg.Election.Candidacy == config.CandidacySession,
			TTL:      cfg.Election.SessionTTL.Std(),
		},
		FollowsGroup: follows,
	}, true
}

// startCandidacy is the candidacy an agent starts with: ineligible while
// in maintenance, while it has checks that have not passed yet, and,
// when sessions hold its candidacy, until a local process opens one, and
// in an election that follows a group, until it leads the anchor.
func startCandidacy(cfg config.Config, maintenance, followsGroup bool) protocols.Candidacy {
	return protocols.Candidacy{
		Priority:   uint8(cfg.Node.Priority),
		Ineligible: maintenance || len(cfg.Checks) > 0 || cfg.Election.Candidacy == config.CandidacySession || followsGroup,
	}
}
