package core

import (
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// Resync re-applies every member gossip knows (membership.EventResync).
func (n *Node) Resync(now protocols.Time, members []membership.Member) {
	for _, m := range members {
		n.applyMember(now, m)
	}
	n.settle(now)
}

// ApplyMember turns one membership change into protocol input and
// transport peer changes.
func (n *Node) ApplyMember(now protocols.Time, m membership.Member) {
	n.applyMember(now, m)
	n.settle(now)
}

func (n *Node) applyMember(now protocols.Time, m membership.Member) {
	if m.Name == n.self.Name {
		return
	}
	prev, known := n.members[m.Name]
	if n.outOfElection(m) {
		if !known || !isLive(prev) || m.State == membership.StateReaped {
			if known && m.State == membership.StateReaped {
				n.forgetMember(now, prev, known)
			}
			return
		}
		// A live member of this election that stopped running it (it
		// restarted without it): to the election it has left; it comes
		// back, as from a leave, when it runs it again.
		m.State = membership.StateLeft
	}
	if m.State == membership.StateReaped {
		n.forgetMember(now, prev, known)
		n.admitRefused(now, prev.ID)
		return
	}
	if _, had := n.members[m.Name]; !had {
		n.rejoinNames = nil // a new name: RejoinViewInto sorts again
	}
	n.members[m.Name] = m
	n.vt.membersSeen = false
	if known && n.byID[prev.ID] == m.Name && (prev.ID != m.ID || prev.PeerID != m.PeerID) {
		// Back with another id or another libp2p identity: the old one
		// is gone for good. Without this its transport peer kept the
		// peer id, the new id was refused as taken, and the member was
		// shut out until every other agent restarted.
		n.log.Infow("member changed identity", "member", m.Name,
			"old_id", uint64(prev.ID), "id", uint64(m.ID),
			"old_peer_id", prev.PeerID, "peer_id", m.PeerID)
		n.dropID(now, prev.ID)
		n.admitRefused(now, prev.ID)
		known = false
	}
	switch m.State {
	case membership.StateAlive, membership.StateSuspect:
		if m.ID == protocols.None {
			return
		}
		if n.refuseDuplicate(m) {
			return
		}
		delete(n.refused, m.Name)
		n.byID[m.ID] = m.Name
		returned := !known || prev.State == membership.StateDead || prev.State == membership.StateLeft
		if m.PeerID != "" && (!known || prev.PeerID != m.PeerID || prev.PeerAddr != m.PeerAddr || prev.State != m.State) {
			if !(n.cfg.Unsafe.NoPeerOnReturn && known && returned) {
				n.peers = append(n.peers, n.peerChange(m))
			}
		}
		if returned {
			n.log.Infow("member up", "member", m.Name, "id", uint64(m.ID))
			n.proto.MemberUp(now, n.protoMember(m))
			n.greet(now, m.Name)
		} else if old := n.priorityOf(prev); old != n.priorityOf(m) {
			n.priorityChanged(now, m, old)
		}
	case membership.StateDead, membership.StateLeft:
		if _, refused := n.refused[m.Name]; refused {
			delete(n.refused, m.Name)
			return
		}
		if n.byID[m.ID] != m.Name {
			return
		}
		n.log.Infow("member down", "member", m.Name, "state", m.State.String())
		n.memberDown(now, m.ID, m.Name)
		n.forgetDetector(now, m.ID)
		if m.State == membership.StateLeft {
			// It said goodbye: stop its sender and refuse its streams.
			// A dead member keeps its peer, since it may be only
			// partitioned away; it is removed when gossip reaps it.
			n.peers = append(n.peers, PeerChange{ID: m.ID, Remove: true, Name: m.Name})
			n.forgetProbe(m.ID)
		}
		n.admitRefused(now, m.ID)
	}
}

// priorityChanged hands a live member's new gossip priority to the
// protocol at once. Bully and ring rank members by (priority, id) and
// otherwise learn a change only from the member's next message or its
// next MemberUp, so an agent restarted with another node.priority before
// gossip declared it dead (its metadata changes, it never goes down) was
// ranked by the old one. MemberUp of a known member updates its record;
// the protocols' rosters also clear their suspicion of it, so while the
// detector suspects the member the update waits until the suspicion
// clears (unsuspect). A member out of the election for its settings
// (compareDigest told the protocol it is down) gets it with the MemberUp
// that takes it back.
func (n *Node) priorityChanged(now protocols.Time, m membership.Member, old uint8) {
	n.log.Infow("member priority changed", "member", m.Name, "old", old, "priority", n.priorityOf(m))
	switch {
	case n.settingsConflict(m.ID):
	case n.suspected[m.ID]:
		if n.priorityDue == nil {
			n.priorityDue = make(map[protocols.ID]bool)
		}
		n.priorityDue[m.ID] = true
	default:
		n.proto.MemberUp(now, n.protoMember(m))
	}
}

// refuseDuplicate refuses m, loudly, when another live member (or this
// agent) already holds its id: two agents with one id make every protocol
// misbehave (an observer was reported leader, the real holder of the id
// was cut off), so the one that came second stays out until the first is
// gone. Every agent logs the refusal once per conflict.
func (n *Node) refuseDuplicate(m membership.Member) bool {
	holder, holderAddr := "", ""
	switch owner, ok := n.byID[m.ID]; {
	case m.ID == n.self.ID:
		holder, holderAddr = n.self.Name+" (this agent)", n.cfg.GossipAddr
	case ok && owner != m.Name:
		if o, live := n.members[owner]; live && isLive(o) {
			holder, holderAddr = owner, o.Addr
		}
	}
	if holder == "" {
		return false
	}
	if prev, logged := n.refused[m.Name]; !logged || prev.ID != m.ID || prev.Addr != m.Addr {
		n.log.Errorw("refusing a member that claims an id another agent holds; give every agent its own node.id",
			"id", uint64(m.ID), "member", m.Name, "member_addr", m.Addr,
			"holder", holder, "holder_addr", holderAddr)
	}
	n.refused[m.Name] = m
	return true
}

// admitRefused admits a member refused for claiming id, now that id is
// free.
func (n *Node) admitRefused(now protocols.Time, id protocols.ID) {
	// The first by name, when several claimed it: not map order, so the
	// simulator replays a seed exactly.
	first := ""
	for name, r := range n.refused {
		if r.ID == id && (first == "" || name < first) {
			first = name
		}
	}
	if first == "" {
		return
	}
	delete(n.refused, first)
	if m, ok := n.members[first]; ok && m.ID == id {
		n.log.Infow("admitting a member refused before: the id it claims is free now", "member", first, "id", uint64(id))
		n.applyMember(now, m)
	}
}

// dropID forgets everything kept under a member id that no longer exists:
// its transport peer (sender goroutine, queue, connections), detector and
// suspicion, and tells the protocol it is gone.
func (n *Node) dropID(now protocols.Time, id protocols.ID) {
	if id == protocols.None {
		return
	}
	name := n.byID[id]
	delete(n.byID, id)
	n.peers = append(n.peers, PeerChange{ID: id, Remove: true, Name: name})
	n.forgetProbe(id)
	n.memberDown(now, id, name)
	n.forgetDetector(now, id)
	n.live.forget(id)
}

// forgetMember drops a member gossip has reaped (dead or left long enough
// ago): nothing of it stays, so churn cannot grow the agent's state.
func (n *Node) forgetMember(now protocols.Time, prev membership.Member, known bool) {
	if !known {
		return
	}
	delete(n.members, prev.Name)
	n.rejoinNames = nil
	n.vt.membersSeen = false
	delete(n.refused, prev.Name)
	if n.byID[prev.ID] == prev.Name {
		n.dropID(now, prev.ID)
	}
}

func isLive(m membership.Member) bool {
	return m.State == membership.StateAlive || m.State == membership.StateSuspect
}

// priorityOf is m's priority in this election: what it publishes for it
// ([elections.NAME] priority), else its node.priority.
func (n *Node) priorityOf(m membership.Member) uint8 {
	if n.wire == "" {
		return m.Priority
	}
	return m.PriorityIn(n.wire)
}

// protoMember is m as this election's protocol ranks it.
func (n *Node) protoMember(m membership.Member) protocols.Member {
	pm := m.ProtocolMember()
	pm.Priority = n.priorityOf(m)
	return pm
}
