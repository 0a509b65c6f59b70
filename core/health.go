package core

import (
	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
)

// Health is what the shell knows of this agent's fitness to lead
// (docs/health.md): the facts its checks and maintenance record give, and
// the report its status shows. The decisions that follow are the core's
// (the eligibility rule, in candidacyOf) and the protocol's (an
// ineligible node does not campaign, a leader hands over;
// protocols.CandidacySetter).
type Health struct {
	// Maintenance: an operator asked for maintenance, or the record of it
	// cannot be read.
	Maintenance bool
	// ChecksFailing: a configured check has not passed (yet), or failed.
	ChecksFailing bool
	// Report is shown as the status's health; nil leaves it out (an
	// agent whose health glue has not started).
	Report *api.HealthReport
}

// candidacyOf is the eligibility rule: a node leads only when it is not
// in maintenance, every check passes and it is not stopping. Its priority is the
// configuration's and never changes at runtime.
func (n *Node) candidacyOf(h Health) protocols.Candidacy {
	return protocols.Candidacy{
		// A node stopping stays out of the running (core/shutdown.go),
		// one whose candidacy sessions hold has none without one
		// (core/session.go), and one that follows a group has none
		// unless it leads the group's anchor (core/group.go).
		Ineligible: h.Maintenance || h.ChecksFailing || n.stop.asked || n.noSession() || n.outOfGroup(),
		Priority:   n.cfg.Election.Candidacy.Priority,
	}
}

// SetHealth gives the protocol a new candidacy when the facts change it
// and keeps the report for the status.
//
// The new status is published to watchers even when who leads does not
// change: the health it reports did (maintenance turned on while a check
// already failed changes the report, not the candidacy). The shell calls
// this only when a check changed state or maintenance changed, so the
// extra publications are rare.
func (n *Node) SetHealth(now protocols.Time, h Health) {
	defer n.settle(now)
	n.health = h.Report
	n.forcePublish = true
	n.facts = h
	n.applyCandidacy(now)
}

// applyCandidacy gives the protocol the candidacy the last health facts
// and the sessions make, when it changed.
func (n *Node) applyCandidacy(now protocols.Time) {
	c := n.candidacyOf(n.facts)
	if c == n.candidacy {
		return
	}
	n.candidacy = c
	n.log.Infow("candidacy", "eligible", c.Eligible(), "priority", c.Priority)
	if cs, ok := n.proto.(protocols.CandidacySetter); ok {
		cs.SetCandidacy(now, c)
	}
}

// healthReport is the status's health: the shell's report with what the
// protocol says of a hand-over.
func (n *Node) healthReport(st protocols.Status) *api.HealthReport {
	if n.health == nil {
		return nil
	}
	rep := *n.health
	rep.NoHealthyCandidate = st.NoEligibleTarget
	return &rep
}

// leaderMeta is the named leader's node.meta: this node's own, or what
// gossip says the leader publishes (decoded once per change).
func (n *Node) leaderMeta(leader string) api.Meta {
	switch {
	case leader == "":
		return api.Meta{}
	case leader == n.self.Name:
		return n.cfg.Meta
	}
	m, ok := n.members[leader]
	if !ok || m.UserMeta == "" {
		return api.Meta{}
	}
	if n.metaRaw == m.UserMeta {
		return n.meta
	}
	var meta api.Meta
	if err := meta.UnmarshalJSON([]byte(m.UserMeta)); err != nil {
		return api.Meta{}
	}
	n.metaRaw, n.meta = m.UserMeta, meta
	return meta
}

// Candidacy is the candidacy last given to the protocol.
func (n *Node) Candidacy() protocols.Candidacy { return n.candidacy }

// Transfers counts the leadership hand-overs this node started, by reason,
// for protocols that count them (majority); zero otherwise.
func (n *Node) Transfers() protocols.TransferCounts {
	if tc, ok := n.proto.(interface {
		Transfers() protocols.TransferCounts
	}); ok {
		return tc.Transfers()
	}
	return protocols.TransferCounts{}
}
