package majority

import "github.com/conclave-agent/conclave/protocols"

// contextTransfer marks a MsgVote sent on a leader's TimeoutNow order.
const contextTransfer = 1

// isTransferVote reports whether m is the campaign that this node's current
// leader ordered with TimeoutNow: the one vote request the lease waives,
// because that leader gave its lease up before ordering it.
func (n *Node) isTransferVote(m protocols.Message) bool {
	return m.Kind == protocols.MsgVote && m.Context == contextTransfer &&
		m.Leader != protocols.None && m.Leader == n.leader && m.Term == n.term+1
}

// Resign hands leadership to the voter that acknowledged the newest
// heartbeat. The lease ends at once, before TimeoutNow leaves.
func (n *Node) Resign(now protocols.Time) error {
	if n.state != stateLeader {
		return protocols.ErrNotLeader
	}
	target := n.transferTarget(now, false)
	if target == protocols.None {
		return protocols.ErrNoTransferTarget
	}
	n.transfers.Resign++
	n.transfer(now, target)
	return nil
}

// transferTarget chooses whom to hand leadership to: an eligible voter
// that gossip and the failure detector think alive, of the highest
// priority, then the one that acknowledged the newest heartbeat, then the
// lowest id. recent also requires it to have answered within an election
// timeout, and its candidacy to be known from an answer in this term (a
// hand-over the leader starts on its own, rather than on an operator's
// word): a new leader has heard no voter's candidacy, and handing over to
// an ineligible voter times out and leaves no leader.
func (n *Node) transferTarget(now protocols.Time, recent bool) protocols.ID {
	target := protocols.None
	var best uint64
	var bestPrio uint8
	since := now.Add(-n.cfg.ElectionTimeout)
	for _, id := range n.sortedMembers() {
		v := n.voterName(id)
		if id == n.id || v == "" || n.down[id] || n.suspected[id] {
			continue
		}
		c, known := n.peerCand[v]
		if !c.Eligible() || (recent && !known) {
			continue
		}
		if t, ok := n.lastHeard[v]; recent && (!ok || t < since) {
			continue
		}
		r := n.ackedRound[v]
		if target == protocols.None || c.Priority > bestPrio || (c.Priority == bestPrio && r > best) {
			target, best, bestPrio = id, r, c.Priority
		}
	}
	return target
}

// transfer gives up the lease and orders target to campaign at once.
func (n *Node) transfer(now protocols.Time, target protocols.ID) {
	n.leaseUntil = 0
	n.leaseFloor = n.round
	n.transferTo = target
	n.transferUntil = now.Add(n.cfg.ElectionTimeout)
	n.log.Infow("transferring leadership", "to", target, "term", n.term)
	n.send(protocols.Message{Kind: protocols.MsgTimeoutNow, To: target, Leader: n.id})
}

// noteCandidacy records voter v's candidacy from a heartbeat answer at
// now. Its stability clock restarts when the candidacy changes or when v
// was not heard for an election timeout (it crashed, was cut off, or this
// node only just became leader).
func (n *Node) noteCandidacy(now protocols.Time, v string, c protocols.Candidacy) {
	prev, seen := n.peerCand[v]
	last, heard := n.lastHeard[v]
	if !seen || prev != c || !heard || now.Sub(last) > n.cfg.ElectionTimeout {
		n.candSince[v] = now
	}
	n.peerCand[v] = c
}

// maybeHandOver starts a leadership transfer the leader owes: away from
// itself while it is ineligible, or to an eligible voter of higher
// priority that has been stable for PreemptDelay. An ineligible leader
// with no voter to take over keeps leading and says so in Status
// (docs/health.md explains why).
func (n *Node) maybeHandOver(now protocols.Time) {
	if n.state != stateLeader || n.transferTo != protocols.None {
		return
	}
	if !n.cand.Eligible() {
		target := n.transferTarget(now, true)
		if n.noTarget = target == protocols.None; n.noTarget {
			return
		}
		n.log.Infow("handing leadership over: this node is ineligible", "to", target)
		n.transfers.Health++
		n.transfer(now, target)
		return
	}
	n.noTarget = false
	if !n.anyHigherPriority() {
		return
	}
	target, prio := protocols.None, n.cand.Priority
	since := now.Add(-n.cfg.ElectionTimeout)
	for _, id := range n.sortedMembers() {
		v := n.voterName(id)
		if id == n.id || v == "" || n.down[id] || n.suspected[id] {
			continue
		}
		c := n.peerCand[v]
		if t, ok := n.lastHeard[v]; !ok || t < since || !c.Eligible() || c.Priority <= prio {
			continue
		}
		if s, ok := n.candSince[v]; !ok || now.Sub(s) < n.cfg.PreemptDelay {
			continue
		}
		target, prio = id, c.Priority
	}
	if target == protocols.None {
		return
	}
	n.log.Infow("handing leadership over to a voter of higher priority", "to", target, "priority", prio)
	n.transfers.Priority++
	n.transfer(now, target)
}

// anyHigherPriority reports whether some voter's last known candidacy is
// eligible with a priority above this node's: the only case in which
// maybeHandOver looks for a target. It runs on every heartbeat answer, so
// it walks the voters' candidacies, not every member sorted (a fleet's
// observers made that a leader's largest cost per answer).
func (n *Node) anyHigherPriority() bool {
	for _, c := range n.peerCand {
		if c.Eligible() && c.Priority > n.cand.Priority {
			return true
		}
	}
	return false
}

var _ protocols.CandidacySetter = (*Node)(nil)

// SetCandidacy implements protocols.CandidacySetter. A node that turns
// ineligible abandons a campaign in progress (its term and vote stay) and,
// leading, hands leadership over at once when some voter can take it.
func (n *Node) SetCandidacy(now protocols.Time, c protocols.Candidacy) {
	if c == n.cand {
		return
	}
	n.log.Infow("candidacy changed", "eligible", c.Eligible(), "priority", c.Priority)
	n.cand = c
	switch n.state {
	case statePreCandidate, stateCandidate:
		if !c.Eligible() && !n.cfg.Unsafe.IneligibleCampaigns {
			n.becomeFollower(now, n.term, protocols.None)
		}
	case stateLeader:
		n.maybeHandOver(now)
	}
}

// Transfers returns the hand-overs this node started, by reason.
func (n *Node) Transfers() protocols.TransferCounts { return n.transfers }
