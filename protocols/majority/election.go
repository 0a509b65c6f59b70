package majority

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// maxRedraws bounds the stalls in a row after which a node draws a new
// election deadline instead of campaigning (Tick). Stalls that recur before
// the new deadline can only be told from a driver that always wakes late
// by counting; three draws apart fail together rarely enough.
const maxRedraws = 3

func (n *Node) resetElectionTimer(now protocols.Time) {
	et := n.cfg.ElectionTimeout
	n.electionDeadline = now.Add(et + time.Duration(n.cfg.Rand.Int64N(int64(et))))
	n.redrawn = 0
}

// spread moves the election deadline to a random point in [now, now +
// ElectionTimeout): nodes that would otherwise campaign at one instant
// draw apart, as the randomised timeout meant them to.
func (n *Node) spread(now protocols.Time) {
	n.electionDeadline = now.Add(time.Duration(n.cfg.Rand.Int64N(int64(n.cfg.ElectionTimeout))))
}

// stalled reports whether a timer due at due, and found expired at now,
// is overdue by more than a quarter of an election timeout: the process
// was not running when it fell due (a host overload, a VM pause, SIGSTOP)
// rather than woken a little late. A driver wakes at NextDeadline, or
// ticks at a fixed rate well below that bound. After a stall that every
// voter shared, each of them finds its deadline expired at the same
// wake-up, whatever it drew: campaigning then splits the vote
// (docs/multihost.md).
func (n *Node) stalled(now, due protocols.Time) bool {
	return now.Sub(due) > n.cfg.ElectionTimeout/4
}

func (n *Node) becomeFollower(now protocols.Time, term uint64, leader protocols.ID) {
	if term != n.term {
		n.term = term
		n.vote = protocols.None
	}
	if n.state == stateLeader {
		n.log.Infow("stepping down", "term", n.term)
	}
	n.state = stateFollower
	n.preVoteWon = false
	n.leader = leader
	n.leaseUntil = 0
	n.transferTo = protocols.None
	n.noTarget = false
	n.resetElectionTimer(now)
}

func (n *Node) becomePreCandidate(now protocols.Time) {
	if n.atCeiling(now) {
		return
	}
	n.state = statePreCandidate
	n.preVoteWon = false
	n.leader = protocols.None
	clear(n.granted)
	clear(n.rejected)
	n.resetElectionTimer(now)
	n.log.Debugw("pre-campaign", "term", n.term+1)
	n.granted[n.voterName(n.id)] = true
	ctx := n.newBootRound()
	if n.won() {
		n.campaign(now, false)
		return
	}
	n.broadcast(protocols.Message{Kind: protocols.MsgPreVote, Term: n.term + 1, Context: ctx}, ctx == 0)
}

// campaign raises the term and asks for votes; transfer marks a campaign
// ordered by the current leader's TimeoutNow.
func (n *Node) campaign(now protocols.Time, transfer bool) {
	if n.atCeiling(now) {
		return
	}
	oldLeader := n.leader
	n.term++
	n.vote = n.id
	n.state = stateCandidate
	n.preVoteWon = false
	n.leader = protocols.None
	n.campaignTime = now
	n.voteBlockUntil = now.Add(n.cfg.ElectionTimeout)
	clear(n.granted)
	clear(n.rejected)
	n.resetElectionTimer(now)
	n.log.Infow("campaign", "term", n.term, "transfer", transfer)
	n.granted[n.voterName(n.id)] = true
	ctx := n.newBootRound()
	if n.won() {
		n.becomeLeader(now)
		return
	}
	m := protocols.Message{Kind: protocols.MsgVote, Context: ctx}
	if transfer {
		m.Context = contextTransfer
		m.Leader = oldLeader
	}
	n.broadcast(m, ctx == 0)
}

// atCeiling reports, and logs, that the next term would pass
// protocols.Ceiling: the node then stays a follower rather than wrap.
func (n *Node) atCeiling(now protocols.Time) bool {
	if protocols.CanRaiseTerm(n.term) {
		return false
	}
	n.log.Infow("not campaigning: the term is at the ceiling", "term", n.term, "ceiling", protocols.Ceiling)
	n.becomeFollower(now, n.term, protocols.None)
	return true
}

func (n *Node) won() bool {
	if !n.bootstrapClear() {
		return false
	}
	count := 0
	for v, ok := range n.granted {
		if ok && n.voters[v] {
			count++
		}
	}
	return count >= n.quorum()
}

func (n *Node) lost() bool {
	return len(n.rejected) >= len(n.voters)-n.quorum()+1
}

func (n *Node) becomeLeader(now protocols.Time) {
	n.state = stateLeader
	n.leader = n.id
	n.transferTo = protocols.None
	// Every voter that granted its vote refuses other candidates for an
	// election timeout from receiving the request, sent at campaignTime.
	n.leaseUntil = n.leaseFrom(n.campaignTime)
	n.leaseFloor = n.round
	clear(n.ackedRound)
	clear(n.lastHeard)
	clear(n.peerCand)
	clear(n.candSince)
	n.noTarget = false
	for v := range n.granted {
		n.lastHeard[v] = now
	}
	n.checkQuorumDue = now.Add(n.cfg.ElectionTimeout)
	n.log.Infow("became leader", "term", n.term, "config", n.conf.String())
	clear(n.confAcked)
	if n.cfg.Unsafe.ChangeBeforeInheritedCommit && n.conf.Index != 0 {
		n.committed = n.conf
	} else {
		// Commit what we inherited, in our own term, before any change:
		// an older uncommitted configuration of an earlier term is then
		// outranked on a majority and can never win an election.
		n.propose(protocols.Configuration{Term: n.term, Index: n.conf.Index + 1, Voters: n.conf.Voters})
	}
	n.heartbeat(now)
}

// Tick fires the timers that are due at now.
func (n *Node) Tick(now protocols.Time) {
	switch n.state {
	case stateLeader:
		if n.transferTo != protocols.None && now >= n.transferUntil {
			// The TimeoutNow may still be in flight: once it lands, its
			// target campaigns past every voter's lease. So a leader that
			// gave its lease up for a transfer never takes it back in this
			// term; it steps down and lets an ordinary election decide.
			n.log.Infow("leadership transfer timed out; stepping down", "to", n.transferTo)
			n.becomeFollower(now, n.term, protocols.None)
			return
		}
		// The quorum check runs with a heartbeat (NextDeadline says why).
		if n.cfg.CheckQuorum && now >= n.checkQuorumDue && now >= n.heartbeatDue {
			if !n.quorumActive(now) {
				n.log.Infow("lost contact with a quorum", "term", n.term)
				n.becomeFollower(now, n.term, protocols.None)
				return
			}
			n.checkQuorumDue = now.Add(n.cfg.ElectionTimeout)
		}
		if now >= n.heartbeatDue {
			n.heartbeat(now)
			n.maybeHandOver(now)
		}
	default:
		due := max(n.electionDeadline, n.voteBlockUntil)
		if !n.mayStand() || now < due {
			return
		}
		if n.redrawn < maxRedraws && !n.soleVoter() && n.stalled(now, due) {
			// Whoever else stalled with us wakes now too, its deadline
			// just as expired: draw apart instead of campaigning at once.
			// Messages queued during the stall (a live leader's
			// heartbeat) are stepped before the new deadline. A sole
			// voter has nobody to split with (and its first deadline is
			// its start, which a slow start overshoots).
			n.log.Infow("election timer overshot: the process stalled; drawing a new deadline",
				"overdue", now.Sub(due), "term", n.term)
			n.redrawn++
			n.spread(now)
			return
		}
		switch {
		case n.preVoteWon && n.won():
			// The wait after a contested pre-vote is over (see tally).
			n.campaign(now, false)
		case n.cfg.PreVote:
			n.becomePreCandidate(now)
		default:
			n.campaign(now, false)
		}
	}
}

// NextDeadline implements protocols.Deadliner; it mirrors Tick and the
// lease test in Status, so both must change together.
func (n *Node) NextDeadline(now protocols.Time) (protocols.Time, bool) {
	var next protocols.Time
	ok := false
	arm := func(t protocols.Time) {
		if !ok || t < next {
			next, ok = t, true
		}
	}
	switch n.state {
	case stateLeader:
		if n.transferTo != protocols.None {
			arm(n.transferUntil)
		}
		if n.cfg.CheckQuorum {
			// The check rides the first heartbeat at or after its due
			// time, at most a heartbeat interval late. Due every
			// election timeout from the moment it last ran, it drifted
			// against the heartbeats and cost an idle leader a wake-up
			// of its own every election timeout. Its lateness delays
			// only a cut-off leader's step-down: the lease, which alone
			// lets a leader act as one, keeps its own exact deadline.
			arm(max(n.checkQuorumDue, n.heartbeatDue))
		}
		arm(n.heartbeatDue)
		// Status stops naming us leader when the lease runs out: the
		// driver must wake then to tell its watchers.
		if n.leaseUntil > now {
			arm(n.leaseUntil)
		}
	default:
		if n.mayStand() {
			arm(max(n.electionDeadline, n.voteBlockUntil))
		}
	}
	if ok && next < now {
		next = now
	}
	return next, ok
}

var _ protocols.Deadliner = (*Node)(nil)

func (n *Node) handlePreVote(now protocols.Time, m protocols.Message) {
	grant := n.mayVoteFor(m) && m.Term > n.term && !n.leaseHolds(now) && n.upToDate(m)
	if !grant {
		// Answer with our own term: a rejection must not push the
		// candidate's term up, or PreVote would disrupt after all.
		n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Reject: true, Context: m.Context})
		return
	}
	if n.state == statePreCandidate {
		// A rival of our own pre-vote (see tally). A follower's grant
		// does not count: the one it granted pre-campaigned first and
		// may campaign at once, and whoever waits for everyone that
		// granted it would only bring more pre-candidates in.
		n.rivalTerm = m.Term
	}
	n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Term: m.Term, Context: m.Context})
}

// mayVoteFor reports whether this node may answer request m with a vote:
// it must be a voter of its own configuration or of the candidate's (which
// upToDate then requires to be at least as new). The candidate counts
// votes against its own configuration, and every node votes once per term,
// so who the candidate is does not matter (Raft does not check it either;
// see mayCampaign). As in Raft, a node that has not yet persisted the
// configuration that adds it still votes for a candidate that has: without
// that, a leader that added a member and lost its lease before the member
// heard of it could never be elected again (the new set needs the new
// member's vote). A message without a configuration (an older peer) is
// judged by ours.
func (n *Node) mayVoteFor(m protocols.Message) bool {
	mc := m.Config()
	if mc.Voters == "" {
		return n.isVoter && n.voterName(m.From) != ""
	}
	return n.isVoter || mc.Has(n.name(n.id))
}

// upToDate reports whether the candidate of request m holds a
// configuration at least as new as ours — the analogue of Raft's log
// up-to-date check — and not a different list at the same version. A
// request without a configuration (an older peer) passes.
func (n *Node) upToDate(m protocols.Message) bool {
	mc := m.Config()
	if mc.Voters == "" || n.cfg.Unsafe.VoteForOlderConfig {
		return true
	}
	switch c := mc.Compare(n.conf); {
	case c < 0:
		return false
	case c == 0 && mc.Voters != n.conf.Voters:
		n.problem(fmt.Sprintf("%s has voters [%s] where this node has [%s], both at index %d", n.name(m.From), mc.Voters, n.conf.Voters, mc.Index))
		return false
	}
	return true
}

func (n *Node) handleVote(now protocols.Time, m protocols.Message, transfer bool) {
	already := n.vote == m.From
	grant := n.mayVoteFor(m) && n.upToDate(m) &&
		(already || (n.vote == protocols.None && (transfer || !n.leaseHolds(now))))
	if grant {
		if n.state == statePreCandidate {
			// Having voted for someone else, we can no longer win.
			n.becomeFollower(now, n.term, protocols.None)
		}
		n.vote = m.From
		n.voteBlockUntil = now.Add(n.cfg.ElectionTimeout)
		n.resetElectionTimer(now)
	}
	n.send(protocols.Message{Kind: protocols.MsgVoteResp, To: m.From, Reject: !grant, Context: m.Context})
}

func (n *Node) handleVoteResp(now protocols.Time, m protocols.Message, want state) {
	if n.state != want {
		return
	}
	if want == statePreCandidate {
		// Grants carry the proposed term; rejections carry the voter's own.
		if (!m.Reject && m.Term != n.term+1) || (m.Reject && m.Term != n.term) {
			return
		}
	}
	v := n.voterName(m.From)
	switch {
	case v == "" && n.conf.Index != 0:
		return
	case v == "":
		// A non-voter's answer still counts for the bootstrap check.
	case m.Reject:
		n.rejected[v] = true
	default:
		n.granted[v] = true
	}
	n.tally(now, want)
}

// tally acts on the answers counted so far in the current (pre-)campaign.
func (n *Node) tally(now protocols.Time, want state) {
	switch {
	case n.won() && want == statePreCandidate:
		if n.leaseHolds(now) {
			// We granted a vote or heard a leader since the pre-vote
			// began: campaigning now would break that promise.
			n.becomeFollower(now, n.term, n.leader)
			return
		}
		if n.rivalTerm == n.term+1 {
			// We granted another pre-candidate's pre-vote for this
			// term: it may win its pre-vote at this very moment (a
			// voter both wait on answers both at once, as one waking
			// from a stall does), and two campaigns split the vote.
			// Campaign at a random point of the next election timeout
			// instead; the rival's vote request, if it comes first,
			// finds us willing to grant it.
			if !n.preVoteWon {
				n.preVoteWon = true
				n.spread(now)
				n.log.Debugw("pre-vote won; a rival pre-candidate exists, campaigning later", "term", n.term+1)
			}
			return
		}
		n.campaign(now, false)
	case n.won():
		n.becomeLeader(now)
	case n.lost():
		n.becomeFollower(now, n.term, protocols.None)
	}
}

func (n *Node) onSuspect(now protocols.Time, id protocols.ID) {
	if n.state != stateFollower || id != n.leader || !n.mayStand() {
		return
	}
	// Spread the candidates so that they rarely split the vote.
	earliest := max(now, n.voteBlockUntil)
	jitter := time.Duration(n.cfg.Rand.Int64N(int64(n.cfg.ElectionTimeout / 2)))
	if d := earliest.Add(jitter); d < n.electionDeadline {
		n.electionDeadline = d
	}
}
