package majority

import (
	"errors"
	"fmt"
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

// maxProblems bounds the conflicts a node remembers.
const maxProblems = 16

// setConf makes c the configuration in use.
func (n *Node) setConf(c protocols.Configuration) {
	if c != n.conf {
		clear(n.held)
	}
	n.conf = c
	clear(n.voters)
	for _, v := range c.VoterList() {
		n.voters[v] = true
	}
	n.isVoter = n.voters[n.members[n.id].Name]
}

// problem records a configuration conflict (deduplicated, bounded).
func (n *Node) problem(line string) {
	if slices.Contains(n.problems, line) {
		return
	}
	n.log.Infow("configuration conflict", "problem", line)
	if len(n.problems) == maxProblems {
		n.problems = slices.Delete(n.problems, 0, 1)
	}
	n.problems = append(n.problems, line)
}

// Problems implements protocols.VoterChanger.
func (n *Node) Problems() []string { return slices.Clone(n.problems) }

// propose makes c the leader's configuration; it is committed once a
// majority of c's voters acknowledged having persisted it.
func (n *Node) propose(c protocols.Configuration) {
	n.log.Infow("proposing configuration", "config", c.String(), "from", n.conf.String())
	n.setConf(c)
	n.maybeCommit()
}

// maybeCommit marks the leader's configuration committed once a majority
// of its voters persisted it; the leader counts itself only if it is one
// of them (its own persist precedes every message that carries it). A
// leader that is not a voter of a committed configuration steps down.
func (n *Node) maybeCommit() {
	if n.state != stateLeader || n.committed == n.conf {
		return
	}
	count := 0
	for v := range n.voters {
		if (n.isVoter && v == n.name(n.id)) || n.confAcked[v] == n.conf {
			count++
		}
	}
	if count < len(n.voters)/2+1 {
		return
	}
	n.committed = n.conf
	n.log.Infow("configuration committed", "config", n.conf.String())
}

// adoptNewerConfig adopts the configuration a voter that refused us holds
// when it is newer than ours. Without it a node that missed the last
// leader's configuration could never be elected while every node holding
// the newer one is ineligible and does not campaign (docs/health.md): the
// newer ones refuse it and nobody else would tell it. The configuration was
// persisted by a voter, so some leader proposed it; holding it only makes
// this node's next request pass more voters' up-to-date check. Bootstrap
// lists (index 0) are never adopted; a node holding one adopts a
// replicated configuration as it would from a leader's heartbeat.
func (n *Node) adoptNewerConfig(m protocols.Message) {
	mc := m.Config()
	if n.state == stateLeader || mc.Voters == "" || mc.Index == 0 || mc.Compare(n.conf) <= 0 {
		return
	}
	if err := mc.Check(); err != nil {
		return
	}
	n.log.Infow("adopting a newer configuration from a voter that refused us", "member", n.name(m.From), "config", mc.String(), "was", n.conf.String())
	n.setConf(mc)
}

// noteConfigHeld learns from m that its sender holds the configuration in
// use: every message carries its sender's configuration, persisted before
// the message left (the Ready contract), and a configuration a majority of
// its own voters has persisted while still in its term is committed
// (docs/voters.md). Only a sender no later than the configuration's own
// term counts: it had voted in no later term when it held the
// configuration, so every later election needs one such voter, who
// refuses a candidate holding anything older — Raft's rule that replicas
// commit an entry only in the term that wrote it. A holder in a later
// term may have adopted the configuration from a refusal
// (adoptNewerConfig) after voting in a leader that never had it; counting
// it would call committed a configuration that leader is about to
// replace at the same index. A node that
// is not a voter of it then stops campaigning (mayCampaign). Without this a
// member left out of the voters — a removed voter that restarted, or one
// whose starting list named it while the cluster's replicated one does
// not — campaigns for ever unless a leader's heartbeat tells it what is
// committed, and a leader heartbeats only its voters when gossip carries
// the rest.
func (n *Node) noteConfigHeld(now protocols.Time, m protocols.Message) {
	if n.cfg.Unsafe.IgnoreHeldConfig || n.state == stateLeader || n.committed == n.conf || n.conf.Index == 0 || m.Config() != n.conf || senderTermAtMost(m) > n.conf.Term {
		return
	}
	name := n.voterName(m.From)
	if name == "" || n.held[name] {
		return
	}
	n.held[name] = true
	if len(n.held) < n.quorum() {
		return
	}
	n.committed = n.conf
	n.log.Infow("configuration committed: a majority of its voters hold it", "config", n.conf.String())
	if n.state != stateFollower && !n.mayCampaign() {
		// A (pre-)candidate outside the committed configuration can
		// never win: it follows (an observer) instead of waiting as a
		// candidate for ever.
		n.becomeFollower(now, n.term, protocols.None)
	}
}

// senderTermAtMost bounds the term m's sender was in when it sent m. A
// message carries its sender's term, except a pre-vote request and a
// granted pre-vote answer, which carry the proposed term, above the
// sender's (a grant requires it; see handlePreVote).
func senderTermAtMost(m protocols.Message) uint64 {
	if m.Kind == protocols.MsgPreVote || (m.Kind == protocols.MsgPreVoteResp && !m.Reject) {
		return m.Term - 1
	}
	return m.Term
}

var _ protocols.VoterChanger = (*Node)(nil)

// ChangeVoters implements protocols.VoterChanger: the leader proposes its
// configuration with one voter added or removed (docs/voters.md). It
// refuses while the previous configuration — including the one inherited
// at election, which the leader commits first in its own term — is not
// committed, and when fewer voters of the new set than its majority have
// answered within an election timeout.
func (n *Node) ChangeVoters(now protocols.Time, c protocols.VoterChange) error {
	if n.state != stateLeader || n.transferTo != protocols.None || now >= n.leaseUntil {
		return fmt.Errorf("majority: change voters: %w", protocols.ErrNotLeader)
	}
	if n.committed != n.conf {
		return fmt.Errorf("majority: change voters: configuration %s is not committed yet: %w", n.conf, protocols.ErrChangeInFlight)
	}
	if (c.Add == "") == (c.Remove == "") {
		return errors.New("majority: change voters: name exactly one voter to add or to remove")
	}
	vs := n.conf.VoterList()
	switch {
	case c.Add != "":
		if n.voters[c.Add] {
			return fmt.Errorf("majority: add %q: already a voter: %w", c.Add, protocols.ErrUnknownMember)
		}
		if !n.knownName(c.Add) {
			return fmt.Errorf("majority: add %q: no such member: %w", c.Add, protocols.ErrUnknownMember)
		}
		vs = append(vs, c.Add)
	default:
		if !n.voters[c.Remove] {
			return fmt.Errorf("majority: remove %q: not a voter: %w", c.Remove, protocols.ErrUnknownMember)
		}
		if len(vs) == 1 {
			return fmt.Errorf("majority: remove %q: the last voter: %w", c.Remove, protocols.ErrWouldLoseQuorum)
		}
		vs = slices.DeleteFunc(vs, func(v string) bool { return v == c.Remove })
	}
	next, err := protocols.NewConfiguration(n.term, n.conf.Index+1, vs)
	if err != nil {
		return fmt.Errorf("majority: change voters: %w", err)
	}
	since := now.Add(-n.cfg.ElectionTimeout)
	live := 0
	for _, v := range vs {
		if t, ok := n.lastHeard[v]; (v == n.name(n.id)) || (ok && t >= since) {
			live++
		}
	}
	if need := len(vs)/2 + 1; live < need {
		return fmt.Errorf("majority: change voters to [%s]: %d of them answered within %v, %d needed: %w",
			next.Voters, live, n.cfg.ElectionTimeout, need, protocols.ErrWouldLoseQuorum)
	}
	n.propose(next)
	// Spread it now rather than at the next heartbeat.
	n.heartbeat(now)
	return nil
}

func (n *Node) knownName(name string) bool {
	for _, m := range n.members {
		if m.Name == name {
			return true
		}
	}
	return false
}
