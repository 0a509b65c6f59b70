package core

import (
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

// This file is the detector policy (docs/design.md §3): which member gets a
// phi detector, when a suspicion is raised and cleared, and when a
// detector is forgotten. Every liveness bug found with real processes so
// far lived in these few rules; Unsafe reproduces them for the simulator.

// heard records a heartbeat (or a heartbeat's answer) from id: followers
// watch the leader this way, and a leader watches its followers. A member
// suspected before is cleared at once.
func (n *Node) heard(now protocols.Time, id protocols.ID) {
	n.watch(now, id, false)
	n.live.beat(now, id)
	if n.suspected[id] {
		delete(n.suspected, id)
		n.log.Infow("member heard again", "member", n.byID[id])
		n.unsuspect(now, id)
	}
}

// watch makes this election watch id in the shared detectors, once.
func (n *Node) watch(now protocols.Time, id protocols.ID, start bool) {
	if !n.watching[id] {
		n.watching[id] = true
		n.live.watch(now, id, start)
	}
}

// unwatch stops this election watching id.
func (n *Node) unwatch(id protocols.ID) {
	if n.watching[id] {
		delete(n.watching, id)
		n.live.unwatch(id)
	}
}

// unsuspect tells the protocol id is no longer suspected, and then hands
// it the priority gossip changed while it was (priorityChanged).
func (n *Node) unsuspect(now protocols.Time, id protocols.ID) {
	n.proto.Suspect(now, id, false)
	if !n.priorityDue[id] {
		return
	}
	delete(n.priorityDue, id)
	if m, ok := n.members[n.byID[id]]; ok && m.ID == id && isLive(m) && !n.settingsConflict(id) {
		n.proto.MemberUp(now, n.protoMember(m))
	}
}

// watchLeader starts watching a newly learned leader as if it had just
// heartbeated: a follower may learn the leader from an announcement
// (ring's LEADER round, bully's COORDINATOR) before its first heartbeat, and
// a leader that dies in between must still become suspected, or ring and
// bully keep routing elections to it until gossip declares it dead.
func (n *Node) watchLeader(now protocols.Time, leader protocols.ID) {
	if n.cfg.Unsafe.NoWatchLeader || leader == n.self.ID || leader == protocols.None {
		return
	}
	n.watch(now, leader, true)
}

// checkDetectors raises a suspicion, once, for every member whose phi
// crossed the threshold.
//
// The protocol hears of them in id order, not map order, so that the
// simulator replays a seed exactly.
func (n *Node) checkDetectors(now protocols.Time) {
	var crossed []protocols.ID // almost always empty: no allocation
	for id := range n.watching {
		if !n.suspected[id] && n.live.suspects(now, id) {
			crossed = append(crossed, id)
		}
	}
	slices.Sort(crossed)
	for _, id := range crossed {
		n.suspected[id] = true
		p, _ := n.live.phiOf(now, id)
		n.log.Infow("member suspected", "member", n.byID[id], "phi", p)
		n.proto.Suspect(now, id, true)
	}
}

// Phi returns the current phi of a member, and whether it is measured.
func (n *Node) Phi(now protocols.Time, id protocols.ID) (float64, bool) {
	if !n.watching[id] {
		return 0, false
	}
	return n.live.phiOf(now, id)
}

// forgetDetectors drops what the detectors learned about members that no
// longer heartbeat us after a leadership change: a follower hears only the
// leader, so a former leader falls silent without having failed, and must
// not stay suspected (ring would skip it). A leader whose followers answer
// its heartbeats (majority) keeps watching them; bully and ring followers
// do not answer heartbeats, so a leader there forgets everything: a
// suspicion it kept could never clear, and a ring leader that skips a
// member that came back (restarted before gossip declared it dead)
// swallows that member's elections for ever. While no leader is known it
// forgets nothing: the leader that was just lost may be dead, and its
// detector is what lets ring and bully route around it before gossip
// declares it dead seconds later.
func (n *Node) forgetDetectors(now protocols.Time, leader protocols.ID) {
	if n.cfg.Unsafe.KeepDetectors {
		return
	}
	if leader == protocols.None || (leader == n.self.ID && n.followersAnswer()) {
		return
	}
	var cleared []protocols.ID
	for id := range n.watching {
		if id == leader && leader != n.self.ID {
			continue
		}
		n.unwatch(id)
		if n.suspected[id] {
			delete(n.suspected, id)
			cleared = append(cleared, id)
		}
	}
	slices.Sort(cleared) // id order, for exact replays
	for _, id := range cleared {
		n.unsuspect(now, id)
	}
}

// followersAnswer reports whether the protocol's followers answer the
// leader's heartbeats (protocols.HeartbeatAnswerer), so that a leader can
// keep watching them.
func (n *Node) followersAnswer() bool {
	a, ok := n.proto.(protocols.HeartbeatAnswerer)
	return ok && a.AnswersHeartbeats()
}

// forgetDetector drops the detector of a member that is down or gone, and
// clears a suspicion the protocol holds for it.
func (n *Node) forgetDetector(now protocols.Time, id protocols.ID) {
	n.unwatch(id)
	if n.suspected[id] {
		delete(n.suspected, id)
		n.unsuspect(now, id)
	}
	// A member down or gone gets its priority with the MemberUp that
	// brings it back.
	delete(n.priorityDue, id)
}

// stepped settles the watch on the sender of m once the protocol has taken
// m. Any message proves a suspected member alive, and one that is not this
// node's leader never heartbeats it, so a suspicion kept would never
// clear: ring skipped a live candidate for ever and its elections went
// round without it. Likewise a heartbeat from a leader this node does not
// follow (another side's, or one stepping down) starts no watch where
// followers do not answer: that leader will not keep heartbeating this
// node, and the detector would accuse it for ever. The simulator's core
// mode found both (docs/simulator.md).
func (n *Node) stepped(now protocols.Time, m protocols.Message) {
	leader := n.proto.Status(now).Leader
	hb := m.Kind == protocols.MsgHeartbeat || m.Kind == protocols.MsgHeartbeatResp
	switch {
	case !hb && n.suspected[m.From] && !n.cfg.Unsafe.HeartbeatsOnlyClear:
		if leader == m.From {
			n.heard(now, m.From)
		} else {
			n.forgetDetector(now, m.From)
		}
	case m.Kind == protocols.MsgHeartbeat && leader != m.From && !n.followersAnswer() && !n.cfg.Unsafe.WatchRivals:
		n.forgetDetector(now, m.From)
	}
}
