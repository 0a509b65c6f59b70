// Package majority is Raft's leader election without a log: terms, one
// persisted vote per term, a quorum of the configured voters, randomised
// election timeouts, PreVote, check-quorum, a leader lease and leadership
// transfer. The epoch (fencing token) is the term.
//
// It is a pure state machine in the sense of package protocols: it never
// starts a goroutine, performs I/O, reads a clock or uses global randomness.
//
// # The lease
//
// A voter that hears a live leader, or grants a vote, refuses every other
// candidate for ElectionTimeout on its own clock. A leader counts a
// heartbeat round as confirmed once a quorum of voters (itself included)
// acknowledged it; every one of them then refuses other candidates until at
// least ElectionTimeout/(1+drift) of real time after the round was sent.
// Any new leader needs one of them, so the old leader may act alone until
// send time + ElectionTimeout×(1−drift)/(1+drift) on its own clock, which
// stays inside that window for any clock-rate drift up to MaxClockDrift.
// Leadership transfer is the one exception: the old leader gives up its
// lease before it sends TimeoutNow, and voters waive their refusal only for
// the candidate of the next term that names their current leader.
//
// A node that restarts has forgotten whom it heard and whom it granted a
// vote, so for one ElectionTimeout after start it neither grants a vote
// (pre-vote included) nor campaigns. Every lease it could have granted or
// held before the crash was counted from an ack sent before the crash, so
// it has run out by then on any clock within MaxClockDrift. The sole voter
// of a configuration is no exception: a leader that removed itself, or one
// elected before this configuration, may hold a lease on its last ack. Only
// a node that has never run (an empty state record) and is the sole voter
// of its bootstrap list campaigns at once: it has acknowledged nobody.
//
// # Timers after a stall
//
// Randomised timeouts separate candidates only while their processes run.
// When every survivor stalls past its deadline (a loaded host, a VM pause),
// all of them find it expired at the same wake-up; and two pre-candidates
// waiting on one stalled voter win their pre-votes at the instant it
// answers both. Either way they would campaign together and split the
// vote. So a node whose timer is overdue by more than a quarter of an
// election timeout draws a new deadline in the next election timeout
// instead of campaigning (up to maxRedraws times in a row; a sole voter
// campaigns at once, having nobody to split with), and a pre-candidate
// that, while a pre-candidate, granted a rival's pre-vote for the same
// term campaigns at a random point of the next election timeout rather
// than at once. Both only delay a campaign; votes, terms and leases are
// untouched.
package majority

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// contextTransfer marks a MsgVote sent on a leader's TimeoutNow order.
const contextTransfer = 1

// contextBootstrap is set in the Context of (pre-)vote requests sent at
// configuration index 0, with the round number in the low bits; responses
// echo it so that the bootstrap check counts only this round's answers.
const contextBootstrap = 1 << 63

// maxProblems bounds the conflicts a node remembers.
const maxProblems = 16

// maxRedraws bounds the stalls in a row after which a node draws a new
// election deadline instead of campaigning (Tick). Stalls that recur before
// the new deadline can only be told from a driver that always wakes late
// by counting; three draws apart fail together rarely enough.
const maxRedraws = 3

// roundHistory is how many recent heartbeat rounds a leader remembers the
// send time of. Older rounds cannot extend a lease that is still running.
const roundHistory = 64

type state uint8

const (
	stateFollower state = iota
	statePreCandidate
	stateCandidate
	stateLeader
)

// Node is one member's majority election. It implements protocols.Protocol.
type Node struct {
	cfg Config
	id  protocols.ID
	log protocols.Logger
	// conf is the newest configuration this node has (it is persisted with
	// the hard state before anything that depends on it is sent); voters
	// is its voter set. committed is the newest one known to be committed.
	conf      protocols.Configuration
	committed protocols.Configuration
	voters    map[string]bool
	// isVoter is false for observers.
	isVoter bool
	// members maps ids to what we know of them; down records MemberDown,
	// suspected the failure detector's verdicts.
	members   map[protocols.ID]protocols.Member
	down      map[protocols.ID]bool
	suspected map[protocols.ID]bool

	term   uint64
	vote   protocols.ID
	state  state
	leader protocols.ID

	// electionDeadline is when a follower or candidate next campaigns.
	electionDeadline protocols.Time
	// redrawn counts the times in a row Tick found the deadline long
	// overshot and drew a fresh one (see stalled); after maxRedraws the
	// next expiry campaigns whatever the overshoot, so a driver that is
	// always late still campaigns. resetElectionTimer clears it.
	redrawn int
	// rivalTerm is the proposed term of the last pre-vote this node
	// granted to another node while a pre-candidate itself; preVoteWon marks a pre-candidate that won
	// its pre-vote and waits for electionDeadline to campaign, because it
	// knew of that rival (see tally).
	rivalTerm  uint64
	preVoteWon bool
	// voteBlockUntil: until then, refuse every candidate but the one
	// already voted for (the lease's other half).
	voteBlockUntil protocols.Time

	// Candidate state.
	campaignTime protocols.Time
	granted      map[string]bool
	rejected     map[string]bool
	// At configuration index 0: the members that answered this round
	// (bootCtx) of (pre-)vote requests.
	replied map[protocols.ID]bool
	bootCtx uint64
	// problems are the configuration conflicts met, oldest first.
	problems []string

	// Leader state.
	round          uint64
	roundSent      [roundHistory]protocols.Time
	ackedRound     map[string]uint64
	lastHeard      map[string]protocols.Time
	leaseUntil     protocols.Time
	leaseFloor     uint64 // rounds at or below this never extend the lease
	heartbeatDue   protocols.Time
	checkQuorumDue protocols.Time
	transferTo     protocols.ID
	transferUntil  protocols.Time
	confirmTerm    uint64
	roundScratch   []uint64
	// confAcked is the configuration each member last acknowledged having
	// persisted.
	confAcked map[string]protocols.Configuration
	// held names the voters of conf that sent a message carrying conf
	// (so have persisted it): a majority of them commits it (see
	// noteConfigHeld). setConf clears it.
	held map[string]bool
	// cand is this node's own candidacy. A leader keeps, per voter, the
	// candidacy its last heartbeat answer carried (peerCand) and since
	// when it has answered without a gap and with that candidacy
	// (candSince), to choose whom to hand leadership to (docs/health.md).
	cand      protocols.Candidacy
	peerCand  map[string]protocols.Candidacy
	candSince map[string]protocols.Time
	// noTarget: this leader is ineligible and found no voter to take over.
	noTarget bool
	// transfers counts the hand-overs this node started, by reason.
	transfers protocols.TransferCounts

	out protocols.Outbox
}

var _ protocols.Protocol = (*Node)(nil)

// New returns a node in the follower (or observer) role, restored from
// cfg.HardState.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:        cfg,
		id:         cfg.ID,
		log:        cfg.Logger,
		voters:     make(map[string]bool, len(cfg.Voters)),
		members:    make(map[protocols.ID]protocols.Member, len(cfg.Members)),
		down:       make(map[protocols.ID]bool),
		suspected:  make(map[protocols.ID]bool),
		term:       cfg.HardState.Term,
		vote:       cfg.HardState.Vote,
		ackedRound: make(map[string]uint64),
		lastHeard:  make(map[string]protocols.Time),
		granted:    make(map[string]bool),
		rejected:   make(map[string]bool),
		replied:    make(map[protocols.ID]bool),
		confAcked:  make(map[string]protocols.Configuration),
		held:       make(map[string]bool),
		cand:       cfg.Candidacy,
		peerCand:   make(map[string]protocols.Candidacy),
		candSince:  make(map[string]protocols.Time),
	}
	// The first Ready announces the starting role: watchers learn it even
	// when nothing else happens.
	n.out.Reset(cfg.HardState, nil)
	if n.log == nil {
		n.log = protocols.NopLogger{}
	}
	if cfg.HardState.Epoch > n.term {
		// Epoch is the term here; a larger stored epoch is only possible
		// from an older format, and the term must not go back from it.
		n.term = cfg.HardState.Epoch
	}
	for _, m := range cfg.Members {
		n.members[m.ID] = m
	}
	conf, err := bootConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("majority: %w", err)
	}
	if file, ferr := protocols.NewConfiguration(0, 0, cfg.Voters); !cfg.HardState.Config.IsZero() && ferr == nil && file.Voters != conf.Voters {
		n.log.Infow("ignoring the configured voters: the data directory holds a configuration",
			"configured", file.Voters, "persisted", conf.String())
	}
	n.setConf(conf)
	if cfg.HardState.ConfigCommitted {
		n.committed = conf
	}
	now := cfg.Now
	switch {
	case n.soleVoter() && n.conf.Index == 0 && (cfg.HardState.IsZero() || cfg.Unsafe.RestartForgetsLease):
		// A sole voter that has never run: nobody can hold a lease on
		// anything it said, so it campaigns at once.
		n.electionDeadline = now
	case n.soleVoter() && n.committed == n.conf && cfg.Unsafe.RestartForgetsLease:
		// The planted bug: a restarted sole voter campaigns at once,
		// forgetting a lease it may have granted before the crash.
		n.electionDeadline = now
	case n.soleVoter() && (n.conf.Index == 0 || n.committed == n.conf):
		// A restarted sole voter may have acknowledged another leader
		// (one that removed itself, or one elected before this
		// configuration) just before it crashed; that leader's lease
		// runs for up to an election timeout after the ack. Waiting one
		// election timeout from the restart outlasts it (package doc, The
		// lease). It then campaigns at once: nobody can split its vote.
		n.voteBlockUntil = now.Add(cfg.ElectionTimeout)
		n.electionDeadline = n.voteBlockUntil
	default:
		n.voteBlockUntil = now.Add(cfg.ElectionTimeout)
		n.resetElectionTimer(now)
	}
	return n, nil
}

// bootConfig chooses the configuration a node starts with: the persisted
// one; else, for a fresh node, the configured list at index 0 (not yet
// replicated); else — state written before configurations were replicated,
// so a cluster already formed — the configured list at index 1, which ranks
// above every bootstrap list and lets differing lists be caught as
// conflicts.
func bootConfig(cfg Config) (protocols.Configuration, error) {
	switch {
	case !cfg.HardState.Config.IsZero():
		return cfg.HardState.Config, nil
	case cfg.HardState.IsZero():
		return protocols.NewConfiguration(0, 0, cfg.Voters)
	default:
		return protocols.NewConfiguration(0, 1, cfg.Voters)
	}
}

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

// mayCampaign reports whether this node may stand for election: a voter,
// or a voter of the newest configuration it knows committed whose newer,
// uncommitted one removes it. The latter is Raft's rule too: a leader that
// removed itself may be the only node holding the new configuration, and
// if it could not campaign (its new majority refusing older candidates)
// nobody could be elected. Its own vote does not count; it gathers a
// majority of the new configuration, leads until that is committed, then
// steps down. A node that restarted does not know what was committed (unless
// its state record says its configuration was), so it may campaign too
// until a leader tells it; an observer that has heard one does not.
func (n *Node) mayCampaign() bool {
	return n.isVoter || (n.conf != n.committed && n.conf.Index != 0 &&
		(n.committed.IsZero() || n.committed.Has(n.name(n.id))))
}

// mayStand reports whether this node may put itself forward now: it may
// campaign and its candidacy is eligible.
func (n *Node) mayStand() bool {
	return n.mayCampaign() && (n.cand.Eligible() || n.cfg.Unsafe.IneligibleCampaigns)
}

// observer reports whether this node is, and may only be, a follower
// without a vote.
func (n *Node) observer() bool {
	return !n.isVoter && n.state == stateFollower && !n.mayCampaign()
}

func (n *Node) soleVoter() bool {
	return n.isVoter && len(n.voters) == 1
}

func (n *Node) name(id protocols.ID) string { return n.members[id].Name }

// voterName returns the voter name of id, or "" when id is not a voter.
func (n *Node) voterName(id protocols.ID) string {
	m, ok := n.members[id]
	if !ok || !n.voters[m.Name] {
		return ""
	}
	return m.Name
}

func (n *Node) quorum() int {
	if n.cfg.Unsafe.QuorumOfGossipView {
		seen := 0
		for _, id := range n.sortedMembers() {
			if n.voterName(id) != "" && !n.down[id] {
				seen++
			}
		}
		return seen/2 + 1
	}
	return len(n.voters)/2 + 1
}

func (n *Node) sortedMembers() []protocols.ID {
	ids := make([]protocols.ID, 0, len(n.members))
	for id := range n.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

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

func (n *Node) send(m protocols.Message) {
	m.From = n.id
	if m.Term == 0 {
		m.Term = n.term
	}
	m.ConfigTerm, m.ConfigIndex, m.Voters = n.conf.Term, n.conf.Index, n.conf.Voters
	m.Ineligible, m.Priority = n.cand.Ineligible, n.cand.Priority
	n.out.Send(m)
}

// broadcast sends m to every live member other than this node; votersOnly
// restricts it to voters.
func (n *Node) broadcast(m protocols.Message, votersOnly bool) {
	for _, id := range n.sortedMembers() {
		if id == n.id || n.down[id] || (votersOnly && n.voterName(id) == "") {
			continue
		}
		m.To = id
		n.send(m)
	}
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

// newBootRound starts a round of the bootstrap check when the
// configuration is at index 0, and returns its Context (0 otherwise).
func (n *Node) newBootRound() uint64 {
	clear(n.replied)
	if n.conf.Index != 0 {
		n.bootCtx = 0
		return 0
	}
	n.bootCtx = contextBootstrap | (n.bootCtx+1)&^contextBootstrap
	return n.bootCtx
}

// bootstrapClear reports whether, at index 0, every known member that
// gossip does not report dead answered this round (see docs/voters.md: a
// bootstrap list must not win while a member that may hold a conflicting
// one is silent).
func (n *Node) bootstrapClear() bool {
	if n.conf.Index != 0 {
		return true
	}
	for id := range n.members {
		if id != n.id && !n.replied[id] && !n.down[id] {
			return false
		}
	}
	return true
}

// outranks reports whether configuration a must win over b: a newer
// version, or at the same version a different list that ranks above
// (longer, then lexicographically larger).
func outranks(a, b protocols.Configuration) bool {
	if c := a.Compare(b); c != 0 {
		return c > 0
	}
	if a.Voters == b.Voters {
		return false
	}
	if la, lb := a.Len(), b.Len(); la != lb {
		return la > lb
	}
	return a.Voters > b.Voters
}

// noteBootstrapReply counts m, a response, towards the bootstrap check; it
// stands the candidate down when m carries a configuration that outranks
// its own, and reports whether it did.
func (n *Node) noteBootstrapReply(now protocols.Time, m protocols.Message) bool {
	if n.bootCtx == 0 || m.Context != n.bootCtx || n.conf.Index != 0 ||
		(n.state != statePreCandidate && n.state != stateCandidate) ||
		(m.Kind != protocols.MsgPreVoteResp && m.Kind != protocols.MsgVoteResp) {
		return false
	}
	n.replied[m.From] = true
	if mc := m.Config(); mc.Voters != "" && (mc.Voters != n.conf.Voters || mc.Compare(n.conf) != 0) {
		if mc.Compare(n.conf) == 0 {
			n.problem(fmt.Sprintf("%s has voters [%s] where this node has [%s], both at index %d", n.name(m.From), mc.Voters, n.conf.Voters, mc.Index))
		}
		if outranks(mc, n.conf) {
			n.log.Infow("standing down: a member holds a configuration that outranks ours", "member", n.name(m.From), "theirs", mc.String(), "ours", n.conf.String())
			n.becomeFollower(now, n.term, protocols.None)
			return true
		}
	}
	if m.Term < n.term {
		// Step drops answers of an older term before the tally, but this
		// one may be the last the check waited for.
		n.tally(now, n.state)
		return true
	}
	return false
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
		if n.cfg.CheckQuorum && now >= n.checkQuorumDue {
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

// AnswersHeartbeats implements protocols.HeartbeatAnswerer: every follower
// answers the leader's heartbeats (check-quorum and the lease count them).
func (n *Node) AnswersHeartbeats() bool { return true }

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
			arm(n.checkQuorumDue)
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

// Step handles a message from a peer.
func (n *Node) Step(now protocols.Time, m protocols.Message) error {
	if !m.Kind.Valid() {
		return fmt.Errorf("majority: kind %v: %w", m.Kind, protocols.ErrUnknownKind)
	}
	if m.Kind > protocols.MsgTimeoutNow {
		return fmt.Errorf("majority: kind %v: %w", m.Kind, protocols.ErrUnknownKind)
	}
	if m.To != n.id {
		return fmt.Errorf("majority: message for %d: %w", m.To, protocols.ErrNotAddressed)
	}
	if _, ok := n.members[m.From]; !ok || m.From == n.id {
		return fmt.Errorf("majority: message from %d: %w", m.From, protocols.ErrUnknownSender)
	}

	if !protocols.AdmitTerm(m.Term, n.term) {
		return fmt.Errorf("majority: %w", protocols.BeyondCeiling("term", m, m.Term, n.term))
	}

	if (m.Kind == protocols.MsgPreVoteResp || m.Kind == protocols.MsgVoteResp) && m.Reject {
		n.adoptNewerConfig(m)
	}
	n.noteConfigHeld(now, m)

	if n.noteBootstrapReply(now, m) {
		return nil
	}

	// Decide before any term change whether this is the transfer campaign
	// our own leader ordered: stepping up to its term forgets the leader.
	transfer := n.isTransferVote(m)
	switch {
	case m.Term > n.term:
		switch m.Kind {
		case protocols.MsgPreVote:
			// Never change term for a pre-vote.
		case protocols.MsgPreVoteResp:
			if m.Reject {
				// A rejecting voter is ahead of us.
				n.becomeFollower(now, m.Term, protocols.None)
				return nil
			}
		case protocols.MsgVote:
			if !transfer && n.leaseHolds(now) {
				n.log.Debugw("ignoring vote request within lease", "from", m.From, "term", m.Term)
				return nil
			}
			n.becomeFollower(now, m.Term, protocols.None)
		case protocols.MsgHeartbeat, protocols.MsgTimeoutNow:
			n.becomeFollower(now, m.Term, m.From)
		default:
			n.becomeFollower(now, m.Term, protocols.None)
		}
	case m.Term < n.term:
		switch m.Kind {
		case protocols.MsgHeartbeat:
			// Tell a stale leader about the newer term so it steps down.
			n.send(protocols.Message{Kind: protocols.MsgHeartbeatResp, To: m.From, Context: m.Context})
		case protocols.MsgPreVote:
			n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Reject: true, Context: m.Context})
		case protocols.MsgVote:
			if m.Context&contextBootstrap != 0 {
				// A bootstrap check needs every member's answer.
				n.send(protocols.Message{Kind: protocols.MsgVoteResp, To: m.From, Reject: true, Context: m.Context})
			}
		}
		return nil
	}

	switch m.Kind {
	case protocols.MsgHeartbeat:
		n.handleHeartbeat(now, m)
	case protocols.MsgHeartbeatResp:
		n.handleHeartbeatResp(now, m)
	case protocols.MsgPreVote:
		n.handlePreVote(now, m)
	case protocols.MsgPreVoteResp:
		n.handleVoteResp(now, m, statePreCandidate)
	case protocols.MsgVote:
		n.handleVote(now, m, transfer)
	case protocols.MsgVoteResp:
		n.handleVoteResp(now, m, stateCandidate)
	case protocols.MsgTimeoutNow:
		if n.mayStand() && m.From == n.leader && n.state == stateFollower {
			n.log.Infow("leadership transfer received", "from", m.From)
			n.campaign(now, true)
		}
	}
	return nil
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
// its own voters has persisted is committed (docs/voters.md). A node that
// is not a voter of it then stops campaigning (mayCampaign). Without this a
// member left out of the voters — a removed voter that restarted, or one
// whose starting list named it while the cluster's replicated one does
// not — campaigns for ever unless a leader's heartbeat tells it what is
// committed, and a leader heartbeats only its voters when gossip carries
// the rest.
func (n *Node) noteConfigHeld(now protocols.Time, m protocols.Message) {
	if n.cfg.Unsafe.IgnoreHeldConfig || n.state == stateLeader || n.committed == n.conf || n.conf.Index == 0 || m.Config() != n.conf {
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

// leaseHolds reports whether this node must refuse other candidates because
// it recently heard a leader or granted a vote.
func (n *Node) leaseHolds(now protocols.Time) bool {
	return !n.cfg.Unsafe.IgnoreLease && now < n.voteBlockUntil
}

// isTransferVote reports whether m is the campaign that this node's current
// leader ordered with TimeoutNow: the one vote request the lease waives,
// because that leader gave its lease up before ordering it.
func (n *Node) isTransferVote(m protocols.Message) bool {
	return m.Kind == protocols.MsgVote && m.Context == contextTransfer &&
		m.Leader != protocols.None && m.Leader == n.leader && m.Term == n.term+1
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

// MemberUp records a live member.
func (n *Node) MemberUp(now protocols.Time, m protocols.Member) {
	if m.ID == protocols.None || m.ID == n.id {
		return
	}
	if old, ok := n.members[m.ID]; ok && old.Name != m.Name {
		n.log.Infow("member renamed", "id", m.ID, "old", old.Name, "new", m.Name)
	}
	n.members[m.ID] = m
	delete(n.down, m.ID)
}

// MemberDown records that gossip considers the member dead or gone.
func (n *Node) MemberDown(now protocols.Time, id protocols.ID) {
	if id == n.id {
		return
	}
	n.down[id] = true
	n.onSuspect(now, id)
}

// Suspect records the failure detector's verdict. Suspecting the leader
// brings the next campaign forward to the moment the lease allows one,
// rather than waiting out the randomised election timeout.
func (n *Node) Suspect(now protocols.Time, id protocols.ID, suspected bool) {
	if id == n.id {
		return
	}
	if !suspected {
		delete(n.suspected, id)
		return
	}
	n.suspected[id] = true
	n.onSuspect(now, id)
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
// timeout (a hand-over the leader starts on its own, rather than on an
// operator's word).
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
		c := n.peerCand[v]
		if !c.Eligible() {
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

// Status reports leadership at now. A leader whose lease ran out, or that
// is handing over, reports no leader at all rather than itself.
func (n *Node) Status(now protocols.Time) protocols.Status {
	st := protocols.Status{Epoch: n.term, Term: n.term, Config: n.conf, Committed: n.committed,
		NoEligibleTarget: n.state == stateLeader && n.noTarget}
	switch n.state {
	case stateLeader:
		// Without a lease we cannot vouch for anyone, ourselves included.
		st.Role = protocols.Follower
		if now < n.leaseUntil && n.transferTo == protocols.None {
			st.Role, st.Leader, st.LeaseUntil = protocols.Leader, n.id, n.leaseUntil
		}
	case stateCandidate, statePreCandidate:
		st.Role = protocols.Candidate
	default:
		st.Role = protocols.Follower
		st.Leader = n.leader
	}
	if n.observer() {
		st.Role = protocols.Observer
	}
	if st.Leader != protocols.None {
		st.LeaderName = n.name(st.Leader)
	}
	return st
}

func (n *Node) hardState() protocols.HardState {
	hs := protocols.HardState{Term: n.term, Vote: n.vote, Epoch: n.term, Config: n.conf,
		ConfigCommitted: n.conf == n.committed && n.conf.Index != 0}
	if n.cfg.Unsafe.VoteNotPersisted {
		hs.Vote = n.out.Persisted().Vote
		if n.out.Persisted().Term != n.term {
			hs.Vote = protocols.None
		}
	}
	return hs
}

func (n *Node) softState() protocols.SoftState {
	ss := protocols.SoftState{Role: protocols.Follower, Leader: n.leader, Epoch: n.term}
	switch n.state {
	case stateLeader:
		ss.Role = protocols.Leader
	case stateCandidate, statePreCandidate:
		ss.Role = protocols.Candidate
	}
	if n.observer() {
		ss.Role = protocols.Observer
	}
	return ss
}

// HasReady reports whether there is state to persist, messages to send or
// a change to announce.
func (n *Node) HasReady() bool { return n.out.HasReady(n.hardState(), n.softState()) }

// Ready returns the pending work; see package protocols for the order.
func (n *Node) Ready() protocols.Ready { return n.out.Ready(n.hardState(), n.softState()) }

// Advance records that rd was handled.
func (n *Node) Advance(rd protocols.Ready) { n.out.Advance(rd) }

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
