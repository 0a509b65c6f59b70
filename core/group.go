package core

import "github.com/conclave-agent/conclave/protocols"

// Fate-sharing groups (docs/elections.md): the elections that name one
// group are led by one agent and fail over together. The group's anchor
// election (config.Config.GroupAnchor) runs as any election; in each of
// the others an agent stands only while it leads the anchor. When the
// anchor's leader changes, the old leader withdraws from the followers
// (and hands over, as an ineligible leader does) and the new one becomes
// their only candidate, so they follow it within an election round.

// SetGroupLead tells a follower election whether this agent leads its
// group's anchor election now (the anchor core's Leads). The shell calls
// it after every input, before the Ready; it is a no-op for an election
// that follows no group. It reports whether the fact changed (the
// election then has work for the shell).
func (n *Node) SetGroupLead(now protocols.Time, leads bool) bool {
	if !n.cfg.FollowsGroup || leads == n.groupLead {
		return false
	}
	defer n.settle(now)
	n.groupLead = leads
	n.log.Infow("group anchor leadership", "leads_anchor", leads)
	n.applyCandidacy(now)
	return true
}

// Leads reports whether this agent leads the election now (within its
// lease, under majority).
func (n *Node) Leads(now protocols.Time) bool {
	return n.proto.Status(now).Role == protocols.Leader
}

// outOfGroup reports whether this election follows a group whose anchor
// this agent does not lead.
func (n *Node) outOfGroup() bool { return n.cfg.FollowsGroup && !n.groupLead }
