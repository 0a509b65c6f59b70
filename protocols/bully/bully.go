// Package bully implements Garcia-Molina's bully election (1982) as a pure
// state machine behind protocols.Protocol: the live member of highest rank
// — (priority, id), so the highest id among those of the highest priority
// — becomes coordinator, announces itself with COORDINATOR and heartbeats
// every member; followers start an election when the failure detector
// suspects the coordinator, when it is reported down, or when its
// heartbeats stop. A recovered member of higher rank takes over from a
// live coordinator only once it has been up and eligible for
// Config.PreemptDelay (highest.Stability).
//
// The package never starts goroutines, performs I/O, reads a clock or uses
// global randomness; the driver feeds time, messages and membership and
// carries out Ready as the protocols package documents.
//
// Bully is not partition-safe: two sides of a partition each elect their own
// coordinator. Every coordinator holds a distinct, strictly increasing epoch
// (see protocols.NextEpoch), persisted before it is announced, so a fenced resource that
// keeps the highest epoch accepts only one of them. docs/bully-ring.md
// describes the protocol and its message counts.
package bully

import (
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/highest"
)

// state is the node's place in the algorithm.
type state uint8

const (
	stFollower state = iota // following leader, or none known
	stElecting              // sent ELECTION, waiting for an OK
	stAwaiting              // got an OK, waiting for the COORDINATOR
	stLeader                // coordinator
)

// Node is one bully participant. It implements protocols.Protocol; all
// methods must be called from one goroutine.
type Node struct {
	id      protocols.ID
	hb, et  time.Duration
	preempt bool
	rand    *rand.Rand
	log     protocols.Logger

	members *highest.Roster

	st     state
	leader protocols.ID // the coordinator followed or being; None while unknown
	epoch  uint64       // epoch of the latest coordinator accepted (or been)
	epochs highest.Epochs

	now      protocols.Time
	deadline protocols.Time // follower: heartbeat timeout; elections: OK/COORDINATOR wait
	hbDue    protocols.Time // leader: next heartbeat round

	// ineligible is the candidacy (SetCandidacy): the node abstains
	// while it is set.
	ineligible bool
	// nudgeAt rate-limits nudge.
	nudgeAt protocols.Time
	// stable is the preempt_delay clock: a follower bullies a lower
	// coordinator out only once it is stable.
	stable highest.Stability
	// abstain is the resign machinery: after Resign the node abstains,
	// then spares the coordinator that replaced it.
	abstain highest.Abstention
	// excluded is the resigned coordinator left out of this node's current
	// election.
	excluded protocols.ID
	// askedIn is the coordinator epoch in which this follower last ran an
	// election on an ELECTION from below (vouchesFor).
	askedIn uint64
	// unreached are the live members the transport fails to reach
	// (SetUnreached), read only while no coordinator is known.
	unreached map[protocols.ID]bool

	out protocols.Outbox
}

var _ protocols.Protocol = (*Node)(nil)

// New validates cfg and returns a follower that knows no leader yet. With
// preemption on and no preempt delay it starts an election at its first
// Tick, as a recovering process does in the paper; otherwise it first waits
// one heartbeat timeout to learn the current coordinator.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hb, et := cfg.durations()
	n := &Node{
		id:      cfg.ID,
		hb:      hb,
		et:      et,
		preempt: !cfg.NoPreempt,
		rand:    highest.Rand(cfg.Rand, cfg.ID, 0x6275_6c6c_79),
		log:     cfg.Logger,
		members: highest.NewRoster(cfg.ID, cfg.Members),
		now:     cfg.Now,
		epoch:   cfg.HardState.Epoch,
		epochs:  highest.NewEpochs(cfg.HardState),
		stable:  highest.NewStability(cfg.PreemptDelay, cfg.Now),

		ineligible: cfg.Candidacy.Ineligible,
	}
	n.members.SetPriority(cfg.ID, cfg.Candidacy.Priority)
	n.members.IDsOnly = cfg.Unsafe.IDsOnly
	if n.log == nil {
		n.log = protocols.NopLogger{}
	}
	initial := n.softState()
	n.out.Reset(cfg.HardState, &initial)
	if n.preempt && cfg.PreemptDelay == 0 {
		n.deadline = cfg.Now
	} else {
		n.resetFollowerTimer()
	}
	return n, nil
}

// abstaining reports whether this node stays out of elections now: after a
// Resign, and while ineligible (SetCandidacy).
func (n *Node) abstaining() bool { return n.ineligible || n.abstain.Active(n.now) }

// send stamps m with this node's id and priority: the priority refreshes
// what the receiver learned from gossip.
func (n *Node) send(m protocols.Message) {
	m.From = n.id
	m.Priority = n.members.Priority(n.id)
	n.out.Send(m)
}

// above reports whether id outranks this node.
func (n *Node) above(id protocols.ID) bool { return n.members.Above(id, n.id) }

func (n *Node) resetFollowerTimer() { n.deadline = highest.Timeout(n.rand, n.now, n.et) }

// Campaign starts an election at once, as if the coordinator had been found
// dead. The agent does not need it; tests and operators use it.
func (n *Node) Campaign(now protocols.Time) {
	n.now = now
	n.startElection(protocols.None)
}

// startElection sends ELECTION to every live member of higher rank except
// exclude; with none, this node is the highest-ranked live one and becomes
// coordinator at once.
func (n *Node) startElection(exclude protocols.ID) {
	if n.abstaining() {
		return
	}
	n.abstain.Campaigning()
	n.excluded = exclude
	var higher []protocols.ID
	for _, id := range n.members.IDs() {
		if n.above(id) && id != exclude && n.members.Live(id) {
			higher = append(higher, id)
		}
	}
	if len(higher) == 0 {
		n.becomeLeader()
		return
	}
	n.log.Debugw("bully: election", "node", n.id, "higher", len(higher))
	n.st = stElecting
	n.leader = protocols.None
	n.deadline = n.now.Add(n.et)
	for _, id := range higher {
		n.send(protocols.Message{Kind: protocols.MsgElection, To: id, Epoch: n.epochs.Seen()})
	}
}

// becomeLeader creates a fresh epoch and announces it. The epoch rises into
// HardState in the same Ready as the COORDINATOR messages, so the driver
// makes it durable before any of them leaves.
func (n *Node) becomeLeader() {
	if !protocols.CanCreateEpoch(n.epochs.Seen()) {
		// The next epoch would pass protocols.Ceiling: stay without a
		// leader rather than wrap.
		n.log.Infow("bully: not taking the lead: the epoch is at the ceiling", "node", n.id, "epoch", n.epochs.Seen())
		n.st, n.leader = stFollower, protocols.None
		n.resetFollowerTimer()
		return
	}
	n.epoch = protocols.NextEpoch(n.epochs.Seen(), n.id)
	n.epochs.Observe(n.epoch)
	n.st = stLeader
	n.leader = n.id
	n.excluded = protocols.None
	n.abstain.Led()
	n.log.Infow("bully: coordinator", "node", n.id, "epoch", n.epoch)
	for _, id := range n.members.IDs() {
		if id != n.id && !n.members.Down(id) {
			n.send(protocols.Message{Kind: protocols.MsgCoordinator, To: id, Leader: n.id, Epoch: n.epoch})
		}
	}
	n.hbDue = n.now.Add(n.hb)
}

func (n *Node) heartbeat(to protocols.ID) {
	n.send(protocols.Message{Kind: protocols.MsgHeartbeat, To: to, Leader: n.id, Epoch: n.epoch, Term: n.epoch})
}

// follow makes leader l of epoch e this node's coordinator.
func (n *Node) follow(l protocols.ID, e uint64) {
	// The coordinator that replaced us after Resign: do not bully it.
	n.abstain.Followed(n.now, !n.above(l), l)
	if n.st == stLeader || n.leader != l || n.epoch != e {
		n.log.Infow("bully: following", "node", n.id, "leader", l, "epoch", e)
	}
	n.st = stFollower
	n.leader, n.epoch = l, e
	n.excluded = protocols.None
	n.resetFollowerTimer()
}

// announce handles COORDINATOR and heartbeat messages: leader l claims epoch
// e.
func (n *Node) announce(l protocols.ID, e uint64) {
	if e < n.epoch && n.ineligible && n.leader == protocols.None && l != n.id && l == protocols.EpochLeader(e) {
		n.nudge(l)
		return
	}
	if e < n.epoch || l == n.id || l != protocols.EpochLeader(e) {
		// Stale, or an epoch its sender did not create: ignore. A stale
		// coordinator learns of the newer one from its heartbeats.
		return
	}
	if !n.above(l) && n.preempt && !n.ineligible && !n.abstain.Spares(n.now, l) {
		// A lower-ranked member leads while we are alive: bully it out,
		// unless we are already electing. seen already covers e, so our
		// epoch exceeds it. A follower that has not been up and eligible
		// for the preempt delay follows it instead, and takes over by
		// this same path at a heartbeat once it is: the coordinator keeps
		// leading until our COORDINATOR reaches it, and a preferred node
		// that flaps never takes over.
		switch {
		case n.st == stElecting || n.st == stAwaiting:
			return
		case n.st == stLeader || n.stable.Stable(n.now):
			n.startElection(protocols.None)
			return
		}
	}
	n.follow(l, e)
}

// Step handles message m received at local time now.
func (n *Node) Step(now protocols.Time, m protocols.Message) error {
	if err := n.members.Addressed(m); err != nil {
		return err
	}
	switch m.Kind {
	case protocols.MsgElection, protocols.MsgOK, protocols.MsgCoordinator,
		protocols.MsgHeartbeat, protocols.MsgHeartbeatResp:
	default:
		return protocols.ErrUnknownKind
	}
	if err := n.epochs.Admit("bully", m); err != nil {
		return err
	}
	n.now = now
	n.epochs.Observe(m.Epoch)
	n.members.SetPriority(m.From, m.Priority)
	switch m.Kind {
	case protocols.MsgElection:
		n.stepElection(m)
	case protocols.MsgOK:
		if n.st == stElecting && n.above(m.From) {
			n.st = stAwaiting
			// The higher node runs its own election first (up to one
			// ElectionTimeout of waiting for OKs), so allow it two.
			n.deadline = n.now.Add(2 * n.et)
		}
	case protocols.MsgCoordinator, protocols.MsgHeartbeat:
		if m.Leader == m.From {
			n.announce(m.From, m.Epoch)
		}
	case protocols.MsgHeartbeatResp:
		// Bully coordinators do not watch their followers.
	}
	return nil
}

func (n *Node) stepElection(m protocols.Message) {
	if n.above(m.From) {
		// Only a resigning coordinator sends ELECTION downwards: it hands
		// over to us and abstains from this round.
		n.startElection(m.From)
		return
	}
	if n.abstaining() {
		// Stay silent, so the sender does not wait on us.
		return
	}
	n.send(protocols.Message{Kind: protocols.MsgOK, To: m.From, Epoch: n.epochs.Seen()})
	switch n.st {
	case stLeader:
		switch {
		case m.Epoch > n.epoch && n.ineligible:
			// The sender would refuse our epoch as stale, and an
			// ineligible node takes no new one: step down.
			n.st, n.leader = stFollower, protocols.None
			n.resetFollowerTimer()
		case m.Epoch > n.epoch:
			// The sender would refuse our epoch as stale: take a new one.
			n.becomeLeader()
		case m.Epoch == n.epoch:
			// The sender knew our epoch and still calls an election: it
			// suspects us. Reassure it now rather than at the next
			// heartbeat.
			n.send(protocols.Message{Kind: protocols.MsgCoordinator, To: m.From, Leader: n.id, Epoch: n.epoch})
		default:
			// The sender had not heard of our epoch yet: the COORDINATOR
			// broadcast (or the next heartbeat) is on its way to it.
		}
	case stFollower:
		if n.vouchesFor(m) {
			return
		}
		n.askedIn = n.epoch
		n.startElection(protocols.None)
	}
}

// vouchesFor reports whether this follower leaves ELECTION m, from a
// lower-ranked node, without an election of its own, as the paper would
// not: it follows a coordinator it believes alive, which ranks above the
// sender (so the sender asked it too, unless it suspects it), and either
// m predates that coordinator (the sender had not seen its epoch: the
// coordinator's broadcast is on its way to it) or this node already ran
// an election in that coordinator's epoch and was answered (followed it
// again since). The sender gets our OK, so it does not take the lead,
// and learns the coordinator from its COORDINATOR or heartbeats. A
// follower that has not yet noticed a loss its sender noticed still
// runs, once, as in the paper.
//
// Without this a follower restarted its election on every ELECTION from
// below, and so did every node above it on the ELECTIONs of that
// restart, over and over as the coordinator's reassurance made them
// followers again: in a failover a late ELECTION, sent before its
// sender heard of the new coordinator, set off waves of restarts, up to
// 1.4 million messages at N = 250 where one wave costs N(N−1)
// (docs/bully-ring.md, "Bully's storm at scale"). Now a node runs at
// most one election per coordinator epoch on ELECTIONs from below.
func (n *Node) vouchesFor(m protocols.Message) bool {
	l := n.leader
	if l == protocols.None || l == n.id || l == m.From || !n.members.Live(l) || !n.members.Above(l, m.From) {
		return false
	}
	return m.Epoch < n.epoch || n.askedIn == n.epoch
}

// Tick fires elapsed timeouts and sends the coordinator's heartbeats.
func (n *Node) Tick(now protocols.Time) {
	n.now = now
	if n.st == stLeader && n.ineligible && now >= n.nudgeAt {
		// An ineligible leader that found nobody to hand over to tries
		// again once an election timeout, as members come back.
		n.nudgeAt = now.Add(n.et)
		if n.Resign(now) == nil {
			return
		}
	}
	if now < n.deadline && n.st != stLeader {
		return
	}
	switch n.st {
	case stLeader:
		if now >= n.hbDue {
			for _, id := range n.members.IDs() {
				if id != n.id && !n.members.Down(id) {
					n.heartbeat(id)
				}
			}
			n.hbDue = now.Add(n.hb)
		}
	case stElecting:
		// No higher id answered: we are the highest alive.
		n.becomeLeader()
	case stAwaiting, stFollower:
		// The higher node that said OK never announced itself, or the
		// coordinator went silent, or our abstention ended without one.
		if n.st == stFollower && n.leader == protocols.None && n.preempt && n.waitsForLeader() {
			n.resetFollowerTimer()
			return
		}
		n.startElection(n.excluded)
		if n.st == stFollower {
			n.resetFollowerTimer()
		}
	}
}

// waitsForLeader: a follower that has heard of no coordinator and is not
// yet stable waits for one rather than campaign while a live member below
// it can start the election (highest.WaitsForLeader). Without it a
// restarted preferred node took leadership at once, before its delay,
// when the coordinator's heartbeats had not reached it yet.
//
// A member below that the transport does not reach is not waited for: it
// will start no election. A seed killed before the first election was
// never heartbeated nor watched, so no detector suspects it, and every
// member above it waited for gossip to declare it dead (about 5 s).
func (n *Node) waitsForLeader() bool {
	return highest.WaitsForLeaderReached(n.members, n.id, n.stable, n.now, n.unreached)
}

var _ protocols.ReachSetter = (*Node)(nil)

// SetUnreached implements protocols.ReachSetter: it records whether the
// transport fails to reach live member id. Only waitsForLeader reads it.
func (n *Node) SetUnreached(now protocols.Time, id protocols.ID, unreached bool) {
	n.now = now
	if !unreached {
		delete(n.unreached, id)
		return
	}
	if n.unreached == nil {
		n.unreached = make(map[protocols.ID]bool)
	}
	n.unreached[id] = true
}

// NextDeadline implements protocols.Deadliner; it mirrors Tick, so both
// must change together. Status does not depend on the time (bully has no
// lease), so only Tick's timers count.
func (n *Node) NextDeadline(now protocols.Time) (protocols.Time, bool) {
	next := n.deadline
	if n.st == stLeader {
		next = n.hbDue
	}
	return max(next, now), true
}

var _ protocols.Deadliner = (*Node)(nil)

// MemberUp records m as live. A coordinator heartbeats it at once, so that a
// returning node learns the leader without waiting a heartbeat interval.
func (n *Node) MemberUp(now protocols.Time, m protocols.Member) {
	n.now = now
	if err := n.members.Up(m); err != nil {
		n.log.Infow("bully: ignoring member", "id", m.ID, "error", err)
		return
	}
	if n.st == stLeader && m.ID != n.id {
		n.heartbeat(m.ID)
	}
}

// MemberDown records id as dead; losing the coordinator starts an election,
// and losing the last higher id a candidate waits on ends its wait.
func (n *Node) MemberDown(now protocols.Time, id protocols.ID) {
	n.now = now
	if n.members.SetDown(id) {
		n.memberLost(id)
	}
}

// Suspect records the failure detector's verdict; suspecting the coordinator
// starts an election, and suspecting the last higher id a candidate waits on
// ends its wait.
func (n *Node) Suspect(now protocols.Time, id protocols.ID, suspected bool) {
	n.now = now
	if n.members.SetSuspected(id, suspected) && suspected {
		n.memberLost(id)
	}
}

// memberLost reacts to id turning suspected or down. A follower of id starts
// an election. A candidate waiting on higher ids — for an OK after its
// ELECTION, or for the COORDINATOR after an OK — of which none is left
// believed alive runs its election step again at once instead of sitting out
// the timeout: with no higher live id left it becomes coordinator. This is
// the usual race of a failover, where a lower node's ELECTION makes a node
// send its own ELECTION to the dead coordinator a moment before its own
// detector suspects it.
func (n *Node) memberLost(id protocols.ID) {
	switch {
	case n.st == stFollower && n.leader == id:
		n.startElection(protocols.None)
	case (n.st == stElecting || n.st == stAwaiting) && n.above(id) && !n.higherLive():
		n.log.Debugw("bully: no higher id left to wait on", "node", n.id, "lost", id)
		n.startElection(n.excluded)
	}
}

// higherLive reports whether a member ranked above this node, other than
// the one excluded from the current election, is believed alive.
func (n *Node) higherLive() bool {
	for _, id := range n.members.IDs() {
		if n.above(id) && id != n.excluded && n.members.Live(id) {
			return true
		}
	}
	return false
}

// nudge tells coordinator l, whose epoch is older than this node's, that a
// newer one exists, by handing over to it as Resign does (an ELECTION
// carrying this node's epoch): l then takes a fresh epoch this node can
// follow. Only an ineligible node without a leader does this — an eligible
// one would elect itself, and an ineligible one that stayed silent
// followed no one for ever (the simulator's health schedules found it: the
// newest coordinator resigned on turning ineligible, while a coordinator
// of an older epoch from a healed partition heartbeated it). At most once
// an election timeout.
func (n *Node) nudge(l protocols.ID) {
	if n.now < n.nudgeAt {
		return
	}
	n.nudgeAt = n.now.Add(n.et)
	n.send(protocols.Message{Kind: protocols.MsgElection, To: l, Epoch: n.epochs.Seen()})
}

// SetCandidacy implements protocols.CandidacySetter (docs/health.md). An
// ineligible node does not put its id forward: it abstains from elections
// as a resigned coordinator does (answers no ELECTION, so lower ids do not
// wait for it, starts none, preempts no lower coordinator) but follows
// and relays as usual; a coordinator that turns ineligible resigns, and
// keeps leading only when no other member is live to take over. Priority
// ranks the node with its id; the other members learn a change from the
// Priority its messages carry. A node that turns eligible starts its
// preempt delay over.
func (n *Node) SetCandidacy(now protocols.Time, c protocols.Candidacy) {
	n.now = now
	prio, eligibility := highest.SetCandidacy(now, c, n.id, n.members, &n.ineligible, &n.stable, &n.abstain)
	if prio {
		n.log.Infow("bully: priority changed", "node", n.id, "priority", c.Priority)
	}
	if !eligibility {
		return
	}
	n.log.Infow("bully: candidacy changed", "node", n.id, "eligible", !c.Ineligible)
	if !n.ineligible {
		return
	}
	switch n.st {
	case stLeader:
		if err := n.Resign(now); err != nil {
			n.log.Infow("bully: ineligible but staying coordinator: no other member is live to take over", "node", n.id)
		}
	case stElecting, stAwaiting:
		n.st, n.leader = stFollower, protocols.None
		n.resetFollowerTimer()
	}
}

// Resign makes the coordinator step down. It hands over to the highest-ranked
// other live member by sending it an ELECTION — the only ELECTION that ever
// goes to a lower rank — which makes that member run an election without us.
// We abstain (answer no ELECTION, start none) until a new coordinator is
// announced or two election timeouts pass, and afterwards do not preempt that
// coordinator even though we rank higher; we take part normally in the next
// election. It
// returns ErrNotLeader on a non-coordinator and ErrNoTransferTarget when no
// other member is live.
func (n *Node) Resign(now protocols.Time) error {
	if n.st != stLeader {
		return protocols.ErrNotLeader
	}
	target := n.members.Highest(protocols.None)
	if target == protocols.None {
		return protocols.ErrNoTransferTarget
	}
	n.now = now
	n.log.Infow("bully: resigning", "node", n.id, "to", target)
	n.st = stFollower
	n.leader = protocols.None
	n.deadline = n.abstain.Begin(now, n.et)
	n.send(protocols.Message{Kind: protocols.MsgElection, To: target, Epoch: n.epochs.Seen()})
	return nil
}

func (n *Node) role() protocols.Role {
	switch n.st {
	case stLeader:
		return protocols.Leader
	case stElecting, stAwaiting:
		return protocols.Candidate
	}
	return protocols.Follower
}

func (n *Node) softState() protocols.SoftState {
	return protocols.SoftState{Role: n.role(), Leader: n.leader, Epoch: n.epoch}
}

// Status reports the coordinator this node knows and its epoch. Bully has no
// lease: LeaseUntil is always zero and Term is the epoch.
func (n *Node) Status(now protocols.Time) protocols.Status {
	return n.members.Status(n.role(), n.leader, n.epoch)
}

// HasReady reports whether Ready has work.
func (n *Node) HasReady() bool { return n.out.HasReady(n.epochs.HardState(), n.softState()) }

// Ready returns the pending work: a risen epoch to persist, messages, and a
// leadership change to announce.
func (n *Node) Ready() protocols.Ready { return n.out.Ready(n.epochs.HardState(), n.softState()) }

// Advance acknowledges rd.
func (n *Node) Advance(rd protocols.Ready) { n.out.Advance(rd) }
