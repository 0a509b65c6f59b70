package majority

import (
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// roundHistory is how many recent heartbeat rounds a leader remembers the
// send time of. Older rounds cannot extend a lease that is still running.
const roundHistory = 64

// leaseFrom is the end of the lease confirmed by a quorum that heard us at
// local time sent.
func (n *Node) leaseFrom(sent protocols.Time) protocols.Time {
	rho := n.cfg.MaxClockDrift
	d := float64(n.cfg.ElectionTimeout) * (1 - rho) / (1 + rho)
	if n.cfg.Unsafe.LeaseTooLong {
		d = float64(3 * n.cfg.ElectionTimeout)
	}
	return sent.Add(time.Duration(d))
}

func (n *Node) heartbeat(now protocols.Time) {
	n.round++
	n.roundSent[n.round%roundHistory] = now
	self := n.voterName(n.id)
	n.ackedRound[self] = n.round
	n.lastHeard[self] = now
	// The leader refuses other candidates like any voter that hears it.
	n.voteBlockUntil = now.Add(n.cfg.ElectionTimeout)
	n.heartbeatDue = now.Add(n.cfg.HeartbeatInterval)
	n.broadcast(protocols.Message{Kind: protocols.MsgHeartbeat, Leader: n.id, Epoch: n.term, Context: n.round, Commit: n.committed.Index}, false)
	n.updateLease()
}

// updateLease extends the lease to the newest round a quorum acknowledged.
func (n *Node) updateLease() {
	rounds := n.roundScratch[:0]
	for v := range n.voters {
		rounds = append(rounds, n.ackedRound[v])
	}
	n.roundScratch = rounds
	slices.Sort(rounds)
	slices.Reverse(rounds)
	q := n.quorum()
	if q > len(rounds) {
		return
	}
	r := rounds[q-1]
	if r <= n.leaseFloor || r == 0 || n.round-r >= roundHistory {
		return
	}
	if until := n.leaseFrom(n.roundSent[r%roundHistory]); until > n.leaseUntil {
		n.leaseUntil = until
	}
}

// AnswersHeartbeats implements protocols.HeartbeatAnswerer: every follower
// answers the leader's heartbeats (check-quorum and the lease count them).
func (n *Node) AnswersHeartbeats() bool { return true }

// quorumActive reports whether a quorum of voters was heard within the last
// election timeout.
func (n *Node) quorumActive(now protocols.Time) bool {
	since := now.Add(-n.cfg.ElectionTimeout)
	count := 0
	for v := range n.voters {
		if t, ok := n.lastHeard[v]; ok && t >= since {
			count++
		}
	}
	return count >= n.quorum()
}

// leaseHolds reports whether this node must refuse other candidates because
// it recently heard a leader or granted a vote.
func (n *Node) leaseHolds(now protocols.Time) bool {
	return !n.cfg.Unsafe.IgnoreLease && now < n.voteBlockUntil
}

func (n *Node) handleHeartbeat(now protocols.Time, m protocols.Message) {
	if n.state != stateFollower {
		// A candidate of this term lost: someone else won it.
		n.becomeFollower(now, n.term, m.From)
	}
	n.leader = m.From
	n.voteBlockUntil = now.Add(n.cfg.ElectionTimeout)
	n.resetElectionTimer(now)
	if mc := m.Config(); mc.Voters != "" {
		switch c := mc.Compare(n.conf); {
		case c > 0:
			n.log.Infow("adopting the leader's configuration", "config", mc.String(), "was", n.conf.String())
			n.setConf(mc)
		case c == 0 && mc.Voters != n.conf.Voters:
			n.problem(fmt.Sprintf("leader %s has voters [%s] where this node has [%s], both at index %d", n.name(m.From), mc.Voters, n.conf.Voters, mc.Index))
		}
		if m.Commit == n.conf.Index && mc == n.conf {
			n.committed = n.conf
		}
	}
	n.send(protocols.Message{Kind: protocols.MsgHeartbeatResp, To: m.From, Context: m.Context})
}

func (n *Node) handleHeartbeatResp(now protocols.Time, m protocols.Message) {
	if n.state != stateLeader {
		return
	}
	name := n.name(m.From)
	if v := n.voterName(m.From); v != "" {
		n.noteCandidacy(now, v, m.Candidacy())
	}
	if mc := m.Config(); mc.Voters != "" {
		n.confAcked[name] = mc
		n.lastHeard[name] = now
		if n.maybeCommit(); n.committed == n.conf && !n.isVoter {
			n.log.Infow("stepping down: this node's removal is committed", "config", n.conf.String())
			n.becomeFollower(now, n.term, protocols.None)
			return
		}
	}
	v := n.voterName(m.From)
	if v == "" {
		return
	}
	n.lastHeard[v] = now
	if m.Context <= n.round && m.Context > n.ackedRound[v] {
		n.ackedRound[v] = m.Context
	}
	if n.transferTo == protocols.None {
		n.updateLease()
	}
	n.maybeHandOver(now)
}

var _ protocols.Confirmer = (*Node)(nil)

// ConfirmLeadership sends a heartbeat round now and returns it as the token
// to wait on. Rounds restart in no term: ackedRound is cleared on election,
// and confirmTerm ties the question to the term it was asked in.
func (n *Node) ConfirmLeadership(now protocols.Time) (uint64, error) {
	if st := n.Status(now); st.Role != protocols.Leader {
		return 0, protocols.ErrNotLeader
	}
	n.heartbeat(now)
	n.confirmTerm = n.term
	return n.round, nil
}

// Confirmed reports whether a quorum of voters acknowledged round token (or
// a later one) and this node still leads the term it was asked in.
func (n *Node) Confirmed(token uint64) bool {
	if n.state != stateLeader || n.term != n.confirmTerm || token == 0 {
		return false
	}
	acked := 0
	for v := range n.voters {
		if n.ackedRound[v] >= token {
			acked++
		}
	}
	return acked >= n.quorum()
}
