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
	"fmt"
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

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
	// held names the voters of conf that sent a message carrying conf in
	// conf's own term (so have persisted it before voting in any later
	// term): a majority of them commits it (see noteConfigHeld). setConf
	// clears it.
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
