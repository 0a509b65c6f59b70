package registry

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/sim"
)

// Several elections per node (sim.Options.Elections; docs/simulator.md,
// "Several elections per node"): the multi-election variant runs the
// default election as core-majority does and named elections beside it,
// each built through core.ConfigFor from an [elections.NAME] table over
// the default [election], as the agent builds them.

// MultiVariant is the registry name of the multi-election variant.
const MultiVariant = "core-multi"

// Named builds the named election name's core configuration for a
// simulated node: the default election's settings (Core's, with
// majority) and the table's overrides, through core.ConfigFor. table
// returns the table for a node, since the voters it names depend on the
// cluster's members.
func Named(name string, table func(c sim.NodeConfig) config.NamedElection) sim.CoreFactory {
	return func(c sim.NodeConfig) (core.Config, error) {
		cfg := nodeConfig(c, core.ProtocolMajority, "")
		cfg.Elections = map[string]config.NamedElection{name: table(c)}
		cc, ok := core.ConfigFor(cfg, name, coreStart(c))
		if !ok {
			return core.Config{}, fmt.Errorf("registry: configuration runs no election %q", name)
		}
		cc.Election.MaxClockDrift = c.MaxClockDrift
		return cc, nil
	}
}

// groupName is the fate-sharing group of the groups cell: the default
// election anchors it (config.Config.GroupAnchor picks it first).
const groupName = "vip"

// NamedInGroup is Named for an election of the group groupName, anchored
// by the default election: both name the group, as an agent's
// [election] and [elections.NAME] tables do.
func NamedInGroup(name string, table func(c sim.NodeConfig) config.NamedElection) sim.CoreFactory {
	return func(c sim.NodeConfig) (core.Config, error) {
		cfg := nodeConfig(c, core.ProtocolMajority, "")
		cfg.Election.Group = groupName
		cfg.Elections = map[string]config.NamedElection{name: table(c)}
		cc, ok := core.ConfigFor(cfg, name, coreStart(c))
		if !ok {
			return core.Config{}, fmt.Errorf("registry: configuration runs no election %q", name)
		}
		if !cc.FollowsGroup {
			return core.Config{}, fmt.Errorf("registry: election %q does not follow group %q", name, groupName)
		}
		cc.Election.MaxClockDrift = c.MaxClockDrift
		return cc, nil
	}
}

// otherVoters names the voters of the named majority elections: the
// last three members (all of a three-node cluster), where the default
// election's are the first ones, so that the two disagree on who votes.
func otherVoters(c sim.NodeConfig) []string {
	var names []string
	for _, m := range c.Members[max(len(c.Members)-3, 0):] {
		names = append(names, m.Name)
	}
	return names
}

// namedTable is the [elections.NAME] table of a named election running
// protocol (ring: algorithm); majority elections get otherVoters, the
// others none (their members are whoever gossip says is up).
func namedTable(protocol, algorithm string) func(c sim.NodeConfig) config.NamedElection {
	return func(c sim.NodeConfig) config.NamedElection {
		p := protocol
		voters := []string{}
		if protocol == core.ProtocolMajority {
			voters = otherVoters(c)
		}
		t := config.NamedElection{Protocol: &p, Voters: &voters}
		if algorithm != "" {
			t.RingAlgorithm = &algorithm
		}
		return t
	}
}

// withSessions is a table whose candidacy local processes' sessions
// hold, with a check-in TTL (zero: none).
func withSessions(table func(c sim.NodeConfig) config.NamedElection, ttl time.Duration) func(c sim.NodeConfig) config.NamedElection {
	return func(c sim.NodeConfig) config.NamedElection {
		t := table(c)
		cand, d := config.CandidacySession, config.Duration(ttl)
		t.Candidacy, t.SessionTTL = &cand, &d
		return t
	}
}

// namedChecks are a named election's checks: majority's all but voter
// configurations (named elections change no voters here) and with the
// isolation check; bully's and ring's without lease and vote checks.
func namedChecks(protocol string, et time.Duration) sim.Checks {
	c := sim.NoLeaseChecks(et)
	if protocol == core.ProtocolMajority {
		c = sim.AllChecks(et)
		c.Isolation = true
	}
	c.Configurations = false
	c.LivenessBound = coreLivenessETs * et
	return c
}

// MultiElections are the named elections of the faults cell: a bully, a
// ring and a majority election whose voters are not the default one's.
func MultiElections(et time.Duration) []sim.ElectionSpec {
	return []sim.ElectionSpec{
		{Name: "bully", Core: Named("bully", namedTable(core.ProtocolBully, "")), Checks: namedChecks(core.ProtocolBully, et)},
		{Name: "ring", Core: Named("ring", namedTable(core.ProtocolRing, ring.AlgLCR)), Checks: namedChecks(core.ProtocolRing, et)},
		{Name: "quorum", Core: Named("quorum", namedTable(core.ProtocolMajority, "")), Checks: namedChecks(core.ProtocolMajority, et)},
	}
}

// sessionTTL is the check-in TTL of the session cell's majority
// election: five election timeouts, so that a paused agent or a silent
// holder loses its session within a fault phase.
func sessionTTL(et time.Duration) time.Duration { return 5 * et }

// SessionElections are the named elections of the sessions cell, whose
// candidacy sessions hold: a majority election with other voters and a
// check-in TTL, and a bully election without one. Neither has the
// isolation check: a session's end moves leadership by design.
func SessionElections(et time.Duration) []sim.ElectionSpec {
	lock := namedChecks(core.ProtocolMajority, et)
	lock.Isolation, lock.SessionLeader = false, true
	task := namedChecks(core.ProtocolBully, et)
	task.SessionLeader = true
	return []sim.ElectionSpec{
		{Name: "lock", Core: Named("lock", withSessions(namedTable(core.ProtocolMajority, ""), sessionTTL(et))), Checks: lock},
		{Name: "task", Core: Named("task", withSessions(namedTable(core.ProtocolBully, ""), 0)), Checks: task},
	}
}

// GroupElections are the named elections of the groups cell, both in the
// default election's fate-sharing group: a majority election over the
// default's voters (the anchor's leader must be one of them) and a bully
// election. Neither has the isolation check: they move with the anchor by
// design.
func GroupElections(et time.Duration) []sim.ElectionSpec {
	inherit := func(protocol string) func(c sim.NodeConfig) config.NamedElection {
		return func(sim.NodeConfig) config.NamedElection {
			p := protocol
			return config.NamedElection{Protocol: &p}
		}
	}
	web := namedChecks(core.ProtocolMajority, et)
	web.Isolation = false
	return []sim.ElectionSpec{
		{Name: "web", Group: true, Core: NamedInGroup("web", inherit(core.ProtocolMajority)), Checks: web},
		{Name: "addr", Group: true, Core: NamedInGroup("addr", inherit(core.ProtocolBully)), Checks: namedChecks(core.ProtocolBully, et)},
	}
}
