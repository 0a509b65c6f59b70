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
// A node that restarts has forgotten whom it heard, so it refuses votes for
// one ElectionTimeout after start, unless it is the only voter.
package majority

import (
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// contextTransfer marks a MsgVote sent on a leader's TimeoutNow order.
const contextTransfer = 1

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
	cfg    Config
	id     protocols.ID
	log    protocols.Logger
	voters map[string]bool
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
	// voteBlockUntil: until then, refuse every candidate but the one
	// already voted for (the lease's other half).
	voteBlockUntil protocols.Time

	// Candidate state.
	campaignTime protocols.Time
	granted      map[string]bool
	rejected     map[string]bool

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
	for _, v := range cfg.Voters {
		n.voters[v] = true
	}
	for _, m := range cfg.Members {
		n.members[m.ID] = m
	}
	n.isVoter = n.voters[n.members[n.id].Name]
	now := cfg.Now
	if n.soleVoter() {
		// Nobody else can hold a lease: campaign at once.
		n.electionDeadline = now
	} else {
		n.voteBlockUntil = now.Add(cfg.ElectionTimeout)
		n.resetElectionTimer(now)
	}
	return n, nil
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
}

func (n *Node) send(m protocols.Message) {
	m.From = n.id
	if m.Term == 0 {
		m.Term = n.term
	}
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
	n.leader = leader
	n.leaseUntil = 0
	n.transferTo = protocols.None
	n.resetElectionTimer(now)
}

func (n *Node) becomePreCandidate(now protocols.Time) {
	if n.atCeiling(now) {
		return
	}
	n.state = statePreCandidate
	n.leader = protocols.None
	clear(n.granted)
	clear(n.rejected)
	n.resetElectionTimer(now)
	n.log.Debugw("pre-campaign", "term", n.term+1)
	n.granted[n.voterName(n.id)] = true
	if n.won() {
		n.campaign(now, false)
		return
	}
	n.broadcast(protocols.Message{Kind: protocols.MsgPreVote, Term: n.term + 1}, true)
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
	n.leader = protocols.None
	n.campaignTime = now
	n.voteBlockUntil = now.Add(n.cfg.ElectionTimeout)
	clear(n.granted)
	clear(n.rejected)
	n.resetElectionTimer(now)
	n.log.Infow("campaign", "term", n.term, "transfer", transfer)
	n.granted[n.voterName(n.id)] = true
	if n.won() {
		n.becomeLeader(now)
		return
	}
	m := protocols.Message{Kind: protocols.MsgVote}
	if transfer {
		m.Context = contextTransfer
		m.Leader = oldLeader
	}
	n.broadcast(m, true)
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
	for v := range n.granted {
		n.lastHeard[v] = now
	}
	n.checkQuorumDue = now.Add(n.cfg.ElectionTimeout)
	n.log.Infow("became leader", "term", n.term)
	n.heartbeat(now)
}

// leaseFrom is the end of the lease confirmed by a quorum that heard us at
// local time sent.
func (n *Node) leaseFrom(sent protocols.Time) protocols.Time {
	rho := n.cfg.MaxClockDrift
	d := float64(n.cfg.ElectionTimeout) * (1 - rho) / (1 + rho)
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
	n.broadcast(protocols.Message{Kind: protocols.MsgHeartbeat, Leader: n.id, Epoch: n.term, Context: n.round}, false)
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
		}
	default:
		if n.isVoter && now >= n.electionDeadline && now >= n.voteBlockUntil {
			if n.cfg.PreVote {
				n.becomePreCandidate(now)
			} else {
				n.campaign(now, false)
			}
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
			arm(n.checkQuorumDue)
		}
		arm(n.heartbeatDue)
		// Status stops naming us leader when the lease runs out: the
		// driver must wake then to tell its watchers.
		if n.leaseUntil > now {
			arm(n.leaseUntil)
		}
	default:
		if n.isVoter {
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
			n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Reject: true})
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
		if n.isVoter && m.From == n.leader && n.state == stateFollower {
			n.log.Infow("leadership transfer received", "from", m.From)
			n.campaign(now, true)
		}
	}
	return nil
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
	n.send(protocols.Message{Kind: protocols.MsgHeartbeatResp, To: m.From, Context: m.Context})
}

func (n *Node) handleHeartbeatResp(now protocols.Time, m protocols.Message) {
	if n.state != stateLeader {
		return
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
}

func (n *Node) handlePreVote(now protocols.Time, m protocols.Message) {
	grant := n.isVoter && n.voterName(m.From) != "" && m.Term > n.term && !n.leaseHolds(now)
	if !grant {
		// Answer with our own term: a rejection must not push the
		// candidate's term up, or PreVote would disrupt after all.
		n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Reject: true})
		return
	}
	n.send(protocols.Message{Kind: protocols.MsgPreVoteResp, To: m.From, Term: m.Term})
}

func (n *Node) handleVote(now protocols.Time, m protocols.Message, transfer bool) {
	already := n.vote == m.From
	grant := n.isVoter && n.voterName(m.From) != "" &&
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
	n.send(protocols.Message{Kind: protocols.MsgVoteResp, To: m.From, Reject: !grant})
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
	if v == "" {
		return
	}
	if m.Reject {
		n.rejected[v] = true
	} else {
		n.granted[v] = true
	}
	switch {
	case n.won() && want == statePreCandidate:
		if n.leaseHolds(now) {
			// We granted a vote or heard a leader since the pre-vote
			// began: campaigning now would break that promise.
			n.becomeFollower(now, n.term, n.leader)
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
	if n.state != stateFollower || id != n.leader || !n.isVoter {
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
	target := protocols.None
	var best uint64
	for _, id := range n.sortedMembers() {
		v := n.voterName(id)
		if id == n.id || v == "" || n.down[id] || n.suspected[id] {
			continue
		}
		if r := n.ackedRound[v]; r > best || target == protocols.None {
			target, best = id, r
		}
	}
	if target == protocols.None {
		return protocols.ErrNoTransferTarget
	}
	n.leaseUntil = 0
	n.leaseFloor = n.round
	n.transferTo = target
	n.transferUntil = now.Add(n.cfg.ElectionTimeout)
	n.log.Infow("transferring leadership", "to", target, "term", n.term)
	n.send(protocols.Message{Kind: protocols.MsgTimeoutNow, To: target, Leader: n.id})
	return nil
}

// Status reports leadership at now. A leader whose lease ran out, or that
// is handing over, reports no leader at all rather than itself.
func (n *Node) Status(now protocols.Time) protocols.Status {
	st := protocols.Status{Epoch: n.term, Term: n.term}
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
	if !n.isVoter {
		st.Role = protocols.Observer
	}
	if st.Leader != protocols.None {
		st.LeaderName = n.name(st.Leader)
	}
	return st
}

func (n *Node) hardState() protocols.HardState {
	hs := protocols.HardState{Term: n.term, Vote: n.vote, Epoch: n.term}
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
	if !n.isVoter {
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
