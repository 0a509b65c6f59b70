// Package ring implements ring elections as a pure state machine behind
// protocols.Protocol: Chang-Roberts (LCR) on the logical ring of live members
// ordered by id, Hirschberg-Sinclair (HS) on the same ring used in both
// directions, and Peterson / Dolev-Klawe-Rodeh (peterson.go) on it
// clockwise, in phases of active nodes. The live member of highest rank — (priority, id), so the
// highest id among those of the highest priority — wins and announces
// itself with a LEADER message sent once around the ring, then heartbeats
// every member; a stalled election restarts after a timeout. A recovered
// member of higher rank usurps a live leader only once it has been up and
// eligible for Config.PreemptDelay (highest.Stability). The ring itself
// stays ordered by id: rank decides who wins, not where messages go.
//
// The package never starts goroutines, performs I/O, reads a clock or uses
// global randomness; the driver feeds time, messages and membership and
// carries out Ready as the protocols package documents.
//
// Ring elections are not partition-safe: each side of a partition can elect
// its own leader. Every leader holds a distinct, strictly increasing epoch
// (see protocols.NextEpoch), persisted before it is announced, so a fenced resource that
// keeps the highest epoch accepts only one of them. docs/bully-ring.md
// describes the three algorithms and their measured message counts.
package ring

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/highest"
)

// state is the node's place in the algorithm.
type state uint8

const (
	stFollower  state = iota // following leader, or none known
	stCandidate              // this node's id circulates in an election
	stLeader                 // elected
)

// Node is one ring participant. It implements protocols.Protocol; all methods
// must be called from one goroutine.
type Node struct {
	id     protocols.ID
	hb, et time.Duration
	alg    string // AlgLCR, AlgHS or AlgPeterson
	rand   *rand.Rand
	log    protocols.Logger

	members *highest.Roster
	// order, when set, replaces the ids as the ring's clockwise order. Only
	// tests set it, to model the arbitrary id arrangements the textbook
	// analyses assume; production rings are ordered by id.
	order []protocols.ID

	st          state
	participant bool // sent or forwarded an election message this round
	leader      protocols.ID
	epoch       uint64 // epoch of the latest leader accepted (or been)
	epochs      highest.Epochs
	relayed     uint64 // epoch of the last LEADER announcement forwarded

	phase   uint32 // HS: current probe phase of our candidacy
	replies uint8  // HS: bit per direction whose reply came back this phase

	pt peterson // Peterson: this node's part in the current round

	now      protocols.Time
	deadline protocols.Time // follower: heartbeat timeout
	roundEnd protocols.Time // participant: the round counts as stalled from here
	hbDue    protocols.Time

	// stable is the preempt_delay clock: a follower usurps a lower
	// leader only once it is stable.
	stable highest.Stability
	// abstain is the resign machinery: after Resign the node relays
	// without competing, then spares the leader that replaced it.
	abstain highest.Abstention
	// ineligible is the candidacy (SetCandidacy): the node abstains
	// while it is set.
	ineligible bool
	// nudgeAt rate-limits nudge.
	nudgeAt protocols.Time

	// inflight holds the election messages (ELECT, HS probes and
	// replies) sent since this node last followed a new leader or became
	// one, so that one sent to a successor that is suspected or reported
	// down right after is sent again at once to the next live one
	// (resend). Bounded by maxHops.
	inflight []sent

	// verify is set while this node's round follows one that stalled:
	// its election messages then ask their receivers for an
	// acknowledgement (protocols.RingAckRequest), and a receiver that
	// gives none within ackWait is routed past (unanswered). Cleared
	// when it follows or becomes a leader.
	verify bool
	// awaiting are the receivers that owe an acknowledgement, each with
	// its due time, in the order asked.
	awaiting []ackDue
	// unanswered are members that did not acknowledge in time: skipped
	// on the ring like suspected ones until heard from, reported up or
	// unsuspected, or until this node follows or becomes a leader.
	unanswered map[protocols.ID]bool

	out protocols.Outbox
}

// ackDue is a receiver that owes this node an acknowledgement by due.
type ackDue struct {
	id  protocols.ID
	due protocols.Time
}

// sent is an election message and when this node sent it.
type sent struct {
	m  protocols.Message
	at protocols.Time
}

var _ protocols.Protocol = (*Node)(nil)

// New validates cfg and returns a follower that knows no leader. It learns
// the leader from heartbeats, or starts an election when none arrives within
// the election timeout.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hb, et := cfg.durations()
	n := &Node{
		id:     cfg.ID,
		hb:     hb,
		et:     et,
		alg:    cfg.Algorithm,
		rand:   highest.Rand(cfg.Rand, cfg.ID, 0x72_696e_67),
		log:    cfg.Logger,
		now:    cfg.Now,
		epoch:  cfg.HardState.Epoch,
		epochs: highest.NewEpochs(cfg.HardState),

		members: highest.NewRoster(cfg.ID, cfg.Members),
		stable:  highest.NewStability(cfg.PreemptDelay, cfg.Now),

		ineligible: cfg.Candidacy.Ineligible,
	}
	if n.alg == "" {
		n.alg = AlgLCR
	}
	n.members.SetPriority(cfg.ID, cfg.Candidacy.Priority)
	n.members.IDsOnly = cfg.Unsafe.IDsOnly
	if n.log == nil {
		n.log = protocols.NopLogger{}
	}
	initial := n.softState()
	n.out.Reset(cfg.HardState, &initial)
	n.resetTimer()
	return n, nil
}

// neighbor is the next live member from this node in direction d, skipping
// suspected and down ones; this node itself when it is alone.
func (n *Node) neighbor(d protocols.Direction) protocols.ID { return n.toward(d, protocols.None) }

// toward is where this node passes on an election message of candidate c
// travelling in direction d: the next live member, or c itself when c comes
// first — suspected, but not known down. A message is never routed past
// its own candidate: c sent it (its id travels only in messages it
// started), so c was alive a few hops ago, while this node's suspicion of
// c may be stale — core's stepped rule clears a suspicion only on a message
// from the suspect itself, and a candidate sends only to its successor, so
// its predecessor, the member that must hand its message back, never hears
// from it. Routed past c, the message went round the members that skip c
// and never came back to it: the round could not end, and a c that should
// win was never elected (docs/bully-ring.md, "Routing around a stale
// suspicion"). If c did die, the message is lost at c instead of circling
// up to maxHops, and the stalled-round timer restarts as before. The
// suspicion itself stays: it still steers every other message.
func (n *Node) toward(d protocols.Direction, c protocols.ID) protocols.ID {
	ring := n.members.IDs()
	if n.order != nil {
		ring = n.order
	}
	i := slices.Index(ring, n.id)
	l := len(ring)
	for k := 1; k < l; k++ {
		j := (i + k) % l
		if d == protocols.CounterClockwise {
			j = (i - k + l) % l
		}
		if n.routable(ring[j]) || (ring[j] == c && !n.members.Down(c)) {
			return ring[j]
		}
	}
	return n.id
}

// routable reports whether election messages may go to id: believed
// alive, and not a member that left an acknowledgement unanswered.
func (n *Node) routable(id protocols.ID) bool {
	return n.members.Live(id) && !n.unanswered[id]
}

// ackWait is how long a receiver asked for an acknowledgement has to
// give it: one election timeout, far above a round trip between live
// members, and short enough that a round stalled by a member that died
// unsuspected is rerouted within about three election timeouts of its
// start (one to stall, up to half of one in jitter, one to notice, the
// rest to go round). Half an election timeout routed past live members
// behind a slow link: the simulator's ring-hs/health cell then lost its
// liveness (seed 17251487395253541591).
func (n *Node) ackWait() time.Duration { return n.et }

// maxHops bounds how far any election message may travel: a message whose
// candidate died unnoticed would otherwise circle for ever.
func (n *Node) maxHops() uint32 { return uint32(2*len(n.members.IDs()) + 2) }

// abstaining reports whether this node stays out of elections now: after a
// Resign, and while ineligible (SetCandidacy).
func (n *Node) abstaining() bool { return n.ineligible || n.abstain.Active(n.now) }

// send stamps m with this node's id and priority (which refreshes what the
// receiver learned from gossip) and keeps election messages for resend.
func (n *Node) send(m protocols.Message) {
	m.From = n.id
	m.Priority = n.members.Priority(n.id)
	if !electionKind(m.Kind) {
		n.out.Send(m)
		return
	}
	n.sendElection(&m)
	if len(n.inflight) >= int(n.maxHops()) {
		n.inflight = slices.Delete(n.inflight, 0, 1)
	}
	n.inflight = append(n.inflight, sent{m, n.now})
}

// electionKind reports whether k is a ring election message: one kept
// for resend, and acknowledged on request.
func electionKind(k protocols.MessageKind) bool {
	switch k {
	case protocols.MsgRingElect, protocols.MsgHSProbe, protocols.MsgHSReply,
		protocols.MsgPetersonFirst, protocols.MsgPetersonSecond, protocols.MsgPetersonWinner:
		return true
	}
	return false
}

// sendElection sends election message m, asking its receiver for an
// acknowledgement while this node verifies its successors (verify).
func (n *Node) sendElection(m *protocols.Message) {
	m.Context = 0
	if n.verify && m.To != n.id {
		m.Context = protocols.RingAckRequest
		if !slices.ContainsFunc(n.awaiting, func(a ackDue) bool { return a.id == m.To }) {
			n.awaiting = append(n.awaiting, ackDue{m.To, n.now.Add(n.ackWait())})
		}
	}
	n.out.Send(*m)
}

// heardFrom records that id is alive (a message from it, an
// acknowledgement, an unsuspicion or a MemberUp): it owes nothing and is
// routed to again.
func (n *Node) heardFrom(id protocols.ID) {
	delete(n.unanswered, id)
	n.awaiting = slices.DeleteFunc(n.awaiting, func(a ackDue) bool { return a.id == id })
}

// settle forgets the acknowledgement machinery once an election ended
// (this node follows or leads): the next round trusts every live member
// again until it stalls.
func (n *Node) settle() {
	n.verify = false
	n.awaiting = nil
	clear(n.unanswered)
}

// checkAcks routes past every receiver whose acknowledgement is overdue:
// it most likely died without being suspected, so the round would
// otherwise stall again and again until gossip declared it dead, seconds
// later (docs/simulator.md, finding 7). Its election messages of the
// current round go again to the next member (resend), as on a
// suspicion.
func (n *Node) checkAcks() {
	for len(n.awaiting) > 0 && n.now >= n.awaiting[0].due {
		id := n.awaiting[0].id
		n.awaiting = n.awaiting[1:]
		if n.unanswered == nil {
			n.unanswered = make(map[protocols.ID]bool)
		}
		n.unanswered[id] = true
		n.log.Infow("ring: no acknowledgement, routing past", "node", n.id, "member", id)
		n.resend(id)
	}
}

// resend sends again, to the next live member in the same direction, every
// election message of the current round that went to lost, now suspected or
// down, at most one election timeout ago: lost most likely died before it
// arrived, and the round would otherwise stall until the stalled-round timer.
// The window is the election timeout, not a heartbeat interval, because a
// detector suspects a member well after its last heartbeat (about 330 ms at
// the agent's defaults), while this node's own silent-leader timer (one
// election timeout, 200 ms) may already have started a round towards it.
// Typical case: a lower node's election message makes this node run and send
// its own to the dead leader a moment before its own detector suspects it.
// The window keeps older messages, which a then-live receiver most likely
// handled, from circling again as duplicates and starting needless rounds;
// a receiver that did handle a re-sent message makes a duplicate, which
// election rounds tolerate (an elected candidate ignores its own id, maxHops
// bounds the rest). Alone on the ring, this node wins instead.
func (n *Node) resend(lost protocols.ID) {
	alone := false
	for i := range n.inflight {
		m := &n.inflight[i].m
		if m.To != lost || n.now.Sub(n.inflight[i].at) > n.et {
			continue
		}
		// A RingElect's Direction is zero: clockwise.
		next := n.toward(m.Direction, m.Candidate)
		if next == lost {
			// A message of the lost member's own candidacy goes to
			// it or nowhere (toward): its round died with it.
			continue
		}
		if next == n.id {
			alone = true
			continue
		}
		n.log.Debugw("ring: re-sending election message", "node", n.id, "lost", lost, "to", next, "kind", m.Kind)
		m.To = next
		m.Priority = n.members.Priority(n.id)
		n.sendElection(m)
	}
	if alone && n.participant && n.st != stLeader && !n.abstaining() {
		n.participant = false
		n.st = stFollower
		n.startElection()
	}
}

func (n *Node) timeout() protocols.Time { return highest.Timeout(n.rand, n.now, n.et) }

func (n *Node) resetTimer() { n.deadline = n.timeout() }

func opposite(d protocols.Direction) protocols.Direction {
	if d == protocols.Clockwise {
		return protocols.CounterClockwise
	}
	return protocols.Clockwise
}

// Campaign starts an election at once, as if the leader had been found dead.
// The agent does not need it; tests and operators use it.
func (n *Node) Campaign(now protocols.Time) {
	n.now = now
	n.startElection()
}

// startElection puts this node's id in the running: LCR sends it clockwise,
// HS probes one hop both ways, Peterson starts a new round as an active
// node. Alone on the ring, the node wins at once.
func (n *Node) startElection() { n.startElectionIn(0) }

// startElectionIn is startElection; a non-zero round is the Peterson round
// to run in (one this node joins), zero a new one.
func (n *Node) startElectionIn(round uint64) {
	if n.abstaining() {
		return
	}
	n.abstain.Campaigning()
	if n.neighbor(protocols.Clockwise) == n.id {
		n.becomeLeader()
		return
	}
	n.log.Debugw("ring: election", "node", n.id)
	n.st = stCandidate
	n.participant = true
	n.leader = protocols.None
	n.roundEnd = n.timeout()
	switch n.alg {
	case AlgHS:
		n.phase, n.replies = 0, 0
		n.probe()
		return
	case AlgPeterson:
		if round == 0 {
			round = n.pt.next()
		}
		n.activate(round)
		return
	}
	n.send(protocols.Message{Kind: protocols.MsgRingElect, To: n.neighbor(protocols.Clockwise), Candidate: n.id, Epoch: n.epochs.Seen()})
}

// probe sends this node's HS probes of the current phase both ways.
func (n *Node) probe() {
	for _, d := range []protocols.Direction{protocols.Clockwise, protocols.CounterClockwise} {
		n.send(protocols.Message{Kind: protocols.MsgHSProbe, To: n.neighbor(d), Candidate: n.id,
			Phase: n.phase, Hops: 1, Direction: d, Epoch: n.epochs.Seen()})
	}
}

// becomeLeader creates a fresh epoch and sends the LEADER announcement round.
// The epoch rises into HardState in the same Ready as the announcement, so
// the driver makes it durable first.
func (n *Node) becomeLeader() {
	if !protocols.CanCreateEpoch(n.epochs.Seen()) {
		// The next epoch would pass protocols.Ceiling: stay without a
		// leader rather than wrap.
		n.log.Infow("ring: not taking the lead: the epoch is at the ceiling", "node", n.id, "epoch", n.epochs.Seen())
		n.st, n.leader, n.participant = stFollower, protocols.None, false
		n.resetTimer()
		return
	}
	n.epoch = protocols.NextEpoch(n.epochs.Seen(), n.id)
	n.epochs.Observe(n.epoch)
	n.st = stLeader
	n.leader = n.id
	n.participant = false
	n.inflight = nil
	n.settle()
	n.abstain.Led()
	n.relayed = n.epoch
	n.log.Infow("ring: leader", "node", n.id, "epoch", n.epoch)
	if next := n.neighbor(protocols.Clockwise); next != n.id {
		n.send(protocols.Message{Kind: protocols.MsgRingLeader, To: next, Leader: n.id, Epoch: n.epoch, Hops: 1})
	}
	n.hbDue = n.now.Add(n.hb)
}

func (n *Node) heartbeats() {
	if n.now < n.hbDue {
		return
	}
	for _, id := range n.members.IDs() {
		if id != n.id && !n.members.Down(id) {
			n.send(protocols.Message{Kind: protocols.MsgHeartbeat, To: id, Leader: n.id, Epoch: n.epoch, Term: n.epoch})
		}
	}
	n.hbDue = n.now.Add(n.hb)
}

// follow makes l, of epoch e, this node's leader.
func (n *Node) follow(l protocols.ID, e uint64) {
	n.abstain.Followed(n.now, !n.above(l), l)
	if n.st != stFollower || n.leader != l || n.epoch != e {
		n.log.Infow("ring: following", "node", n.id, "leader", l, "epoch", e)
		// An election ended. A heartbeat of the same leader ends
		// none: a follower relaying a higher member's round (it
		// usurps the leader) keeps what it sent, and what it awaits.
		n.inflight = nil
		n.settle()
	}
	n.st = stFollower
	n.leader, n.epoch = l, e
	n.resetTimer()
}

// acceptable reports whether an announcement of leader l in epoch e is news
// this node may act on: not older than the epoch it knows, and created by l
// (the epoch's low bits name its leader).
func (n *Node) acceptable(l protocols.ID, e uint64) bool {
	return l != n.id && e >= n.epoch && l == protocols.EpochLeader(e)
}

// above reports whether id outranks this node.
func (n *Node) above(id protocols.ID) bool { return n.members.Above(id, n.id) }

// usurped reports whether leader l ranks below this node, which then
// elects itself instead of following — how a recovered member of higher
// rank takes its place, so that the highest-ranked live member leads. A
// resigned node lets the leader that replaced it be, and a follower that
// has not been up and eligible for the preempt delay follows l for now:
// it usurps at a heartbeat once it is stable, while l keeps leading until
// the new LEADER announcement reaches it, and a preferred node that flaps
// never takes over.
func (n *Node) usurped(l protocols.ID) bool {
	if n.above(l) || n.ineligible || n.abstain.Spares(n.now, l) {
		return false
	}
	return n.st != stFollower || n.stable.Stable(n.now)
}

// Step handles message m received at local time now.
func (n *Node) Step(now protocols.Time, m protocols.Message) error {
	if err := n.members.Addressed(m); err != nil {
		return err
	}
	switch m.Kind {
	case protocols.MsgRingLeader, protocols.MsgHeartbeat, protocols.MsgHeartbeatResp, protocols.MsgRingAck:
	case protocols.MsgRingElect:
		if n.alg != AlgLCR {
			return protocols.ErrUnknownKind
		}
	case protocols.MsgHSProbe, protocols.MsgHSReply:
		if n.alg != AlgHS {
			return protocols.ErrUnknownKind
		}
	case protocols.MsgPetersonFirst, protocols.MsgPetersonSecond, protocols.MsgPetersonWinner:
		if n.alg != AlgPeterson {
			return protocols.ErrUnknownKind
		}
	default:
		return protocols.ErrUnknownKind
	}
	if err := n.epochs.Admit("ring", m); err != nil {
		return err
	}
	n.now = now
	// Election messages carry and merge the highest epoch seen, so a
	// winner's new epoch exceeds every epoch seen on its way round.
	n.epochs.Observe(m.Epoch)
	n.members.SetPriority(m.From, m.Priority)
	n.heardFrom(m.From)
	if m.Context == protocols.RingAckRequest && electionKind(m.Kind) {
		// The sender's round follows a stalled one: answer, and verify
		// this round's next hop too, since our own stall timer may
		// never fire first (a new round replaces ours before it does).
		n.send(protocols.Message{Kind: protocols.MsgRingAck, To: m.From, Context: m.Context})
		n.verify = true
	}
	switch m.Kind {
	case protocols.MsgRingElect:
		n.stepElect(m)
	case protocols.MsgHSProbe:
		n.stepProbe(m)
	case protocols.MsgHSReply:
		n.stepReply(m)
	case protocols.MsgPetersonFirst, protocols.MsgPetersonSecond:
		n.stepPeterson(m)
	case protocols.MsgPetersonWinner:
		n.stepWinner(m)
	case protocols.MsgRingLeader:
		n.stepLeader(m)
	case protocols.MsgHeartbeat:
		if m.Leader == m.From && m.Epoch < n.epoch && n.ineligible && n.leader == protocols.None && m.From == protocols.EpochLeader(m.Epoch) {
			n.nudge(m.From)
			return nil
		}
		if m.Leader != m.From || !n.acceptable(m.From, m.Epoch) {
			return nil
		}
		if n.usurped(m.From) {
			if !n.participant {
				n.startElection()
			}
			return nil
		}
		n.follow(m.From, m.Epoch)
	case protocols.MsgHeartbeatResp, protocols.MsgRingAck:
		// Ring leaders do not watch their followers; an acknowledgement
		// did its work above (heardFrom).
	}
	return nil
}

// joinRound marks this node as taking part in an election round (so it
// swallows lower candidates) and starts the stall timer.
func (n *Node) joinRound() {
	if !n.participant {
		n.participant = true
		n.roundEnd = n.timeout()
	}
}

// candidateGone reports whether c, the candidate of an election message, is
// known dead or unknown: its message must not circle on.
func (n *Node) candidateGone(c protocols.ID) bool {
	return c != protocols.None && (!n.members.Known(c) || n.members.Down(c))
}

// stepElect is LCR: forward higher candidates, replace lower ones by our own
// id unless already taking part, win when our own id comes back.
func (n *Node) stepElect(m protocols.Message) {
	c := m.Candidate
	if m.Hops >= n.maxHops() || n.candidateGone(c) || n.predatesLeadership(m) {
		return
	}
	fwd := func() {
		n.send(protocols.Message{Kind: protocols.MsgRingElect, To: n.toward(protocols.Clockwise, c),
			Candidate: c, Epoch: n.epochs.Seen(), Hops: m.Hops + 1})
	}
	switch {
	case n.abstaining():
		// A resigned leader relays everyone, competing with no one. Its own
		// empty opening message coming back means no one else took it up.
		// An ineligible node drops its own id, sent before it turned so.
		if c != protocols.None && !(n.ineligible && c == n.id) {
			fwd()
		}
	case c == n.id:
		if n.st == stCandidate {
			n.becomeLeader()
		}
	case n.above(c):
		if n.st == stCandidate {
			n.st = stFollower
		}
		n.joinRound()
		fwd()
	default: // lower id, or None: the opening of a resignation
		if !n.participant {
			n.startElection()
		}
	}
}

// predatesLeadership reports whether m, an election message, was sent by
// a member that had not yet seen this leader's epoch: it belongs to a
// round that this node's own election already ended. Acting on it made a
// newly elected leader start another election (a lower candidate's
// message) and give up leadership while the crashed leader before it was
// still routed around only by suspicions the change then dropped, so
// failover waited seconds for gossip (docs/simulator.md, finding 1). A
// member that really lost this leader sends with at least its epoch, or
// hears its heartbeats and follows.
func (n *Node) predatesLeadership(m protocols.Message) bool {
	return n.st == stLeader && m.Epoch < n.epoch
}

// stepProbe is HS: a probe of a higher candidate travels on until it has
// made 2^phase hops, then turns into a reply; lower candidates are
// swallowed; our own probe arriving means it went all the way round.
func (n *Node) stepProbe(m protocols.Message) {
	c := m.Candidate
	if m.Phase > maxPhase || m.Hops == 0 || m.Hops > 1<<m.Phase || n.candidateGone(c) || n.predatesLeadership(m) {
		return
	}
	relay := func() {
		if m.Hops < 1<<m.Phase {
			n.send(protocols.Message{Kind: protocols.MsgHSProbe, To: n.toward(m.Direction, c), Candidate: c,
				Phase: m.Phase, Hops: m.Hops + 1, Direction: m.Direction, Epoch: n.epochs.Seen()})
			return
		}
		back := opposite(m.Direction)
		n.send(protocols.Message{Kind: protocols.MsgHSReply, To: n.toward(back, c), Candidate: c,
			Phase: m.Phase, Hops: 1, Direction: back, Epoch: n.epochs.Seen()})
	}
	switch {
	case n.abstaining():
		if c != protocols.None && !(n.ineligible && c == n.id) {
			relay()
		}
	case c == n.id:
		if n.st == stCandidate {
			n.becomeLeader()
		}
	case n.above(c):
		if n.st == stCandidate {
			n.st = stFollower
		}
		n.joinRound()
		relay()
	default:
		if !n.participant {
			n.startElection()
		}
	}
}

func (n *Node) stepReply(m protocols.Message) {
	c := m.Candidate
	if m.Hops >= n.maxHops() || n.candidateGone(c) {
		return
	}
	if c != n.id {
		n.send(protocols.Message{Kind: protocols.MsgHSReply, To: n.toward(m.Direction, c), Candidate: c,
			Phase: m.Phase, Hops: m.Hops + 1, Direction: m.Direction, Epoch: n.epochs.Seen()})
		return
	}
	if n.st != stCandidate || m.Phase != n.phase {
		return
	}
	// A reply travelling counter-clockwise answers our clockwise probe.
	n.replies |= 1 << opposite(m.Direction)
	if n.replies == 3 {
		n.phase++
		n.replies = 0
		n.probe()
	}
}

// stepLeader handles the LEADER announcement: pass it on once, and follow
// the leader unless it is lower than this node (which then runs an election
// itself).
func (n *Node) stepLeader(m protocols.Message) {
	l, e := m.Leader, m.Epoch
	if l == n.id || m.Hops >= n.maxHops() || !n.acceptable(l, e) {
		return
	}
	if n.relayed != e {
		n.relayed = e
		// Passed on up to the leader itself, which ends the round: n
		// messages in all.
		if next := n.neighbor(protocols.Clockwise); next != n.id {
			n.send(protocols.Message{Kind: protocols.MsgRingLeader, To: next, Leader: l, Epoch: e, Hops: m.Hops + 1})
		}
	}
	if n.usurped(l) {
		if n.st != stCandidate {
			n.participant = false
			n.startElection()
		}
		return
	}
	n.participant = false
	n.follow(l, e)
}

// Tick fires elapsed timeouts and sends the leader's heartbeats.
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
	n.checkAcks()
	if n.participant && now >= n.roundEnd {
		// The round stalled: no LEADER announcement came. Run again
		// unless we follow a leader that is still heard from, or lead.
		// From now on this node asks for acknowledgements (verify), in
		// case a member its rounds go through died without being
		// suspected — a leader too, which relays a higher candidate's
		// round.
		n.participant = false
		n.verify = true
		if n.st == stCandidate || (n.st == stFollower && (now >= n.deadline || !n.members.Live(n.leader))) {
			n.st = stFollower
			n.restart()
			return
		}
	}
	if n.st == stLeader {
		n.heartbeats()
		return
	}
	if !n.participant && now >= n.deadline {
		// The leader went silent, or none was ever heard of. A node that
		// has heard of none and is not yet stable waits for one
		// (highest.WaitsForLeader): a lower member starts the election
		// if none leads.
		if n.st == stFollower && n.leader == protocols.None && highest.WaitsForLeader(n.members, n.id, n.stable, now) {
			n.resetTimer()
			return
		}
		n.restart()
	}
}

// NextDeadline implements protocols.Deadliner; it mirrors Tick, so both
// must change together. Status does not depend on the time (ring elections
// have no lease), so only Tick's timers count: the stalled-round timer of a
// participant, the leader's heartbeats, and otherwise the silent-leader
// timer (a participant's silent-leader timer acts only after its round
// ends).
func (n *Node) NextDeadline(now protocols.Time) (protocols.Time, bool) {
	var next protocols.Time
	ok := false
	arm := func(t protocols.Time) {
		if !ok || t < next {
			next, ok = t, true
		}
	}
	if n.participant {
		arm(n.roundEnd)
	}
	if len(n.awaiting) > 0 {
		arm(n.awaiting[0].due)
	}
	if n.st == stLeader {
		arm(n.hbDue)
	} else if !n.participant {
		arm(n.deadline)
	}
	return max(next, now), ok
}

var _ protocols.Deadliner = (*Node)(nil)

func (n *Node) restart() {
	n.startElection()
	if n.st == stFollower {
		n.resetTimer()
	}
}

// MemberUp records m as live. A leader heartbeats it at once so that a
// returning node learns the leader without waiting.
func (n *Node) MemberUp(now protocols.Time, m protocols.Member) {
	n.now = now
	known := n.members.Known(m.ID)
	if err := n.members.Up(m); err != nil {
		n.log.Infow("ring: ignoring member", "id", m.ID, "error", err)
		return
	}
	if !known && n.order != nil {
		n.order = append(n.order, m.ID)
	}
	n.heardFrom(m.ID)
	if n.st == stLeader && m.ID != n.id {
		n.send(protocols.Message{Kind: protocols.MsgHeartbeat, To: m.ID, Leader: n.id, Epoch: n.epoch, Term: n.epoch})
	}
}

// MemberDown records id as dead; the ring closes over it, election messages
// of the current round sent to it go again to the next live member, and
// losing the leader starts an election.
func (n *Node) MemberDown(now protocols.Time, id protocols.ID) {
	n.now = now
	if n.members.SetDown(id) {
		n.resend(id)
		n.leaderLost(id)
	}
}

// Suspect records the failure detector's verdict; a suspected member is
// skipped on the ring, election messages of the current round sent to it go
// again to the next live member, and suspecting the leader starts an
// election.
func (n *Node) Suspect(now protocols.Time, id protocols.ID, suspected bool) {
	n.now = now
	if !suspected {
		n.heardFrom(id)
	}
	if n.members.SetSuspected(id, suspected) && suspected {
		n.resend(id)
		n.leaderLost(id)
	}
}

func (n *Node) leaderLost(id protocols.ID) {
	if n.st == stFollower && n.leader == id && !n.participant {
		n.startElection()
	}
}

// nudge tells leader l, whose epoch is older than this node's, that a
// newer one exists: an election message without a candidate, sent to l
// itself and carrying this node's epoch, makes l run a fresh election that
// this node relays, and the winner's new epoch is one it can follow. Only
// an ineligible node without a leader does this — an eligible one would
// put itself forward, and an ineligible one that stayed silent followed no
// one for ever (the simulator's health schedules found it: the newest
// leader resigned on turning ineligible while a leader of an older epoch
// from a healed partition heartbeated it). At most once an election
// timeout.
func (n *Node) nudge(l protocols.ID) {
	if n.now < n.nudgeAt {
		return
	}
	n.nudgeAt = n.now.Add(n.et)
	switch n.alg {
	case AlgHS:
		n.send(protocols.Message{Kind: protocols.MsgHSProbe, To: l, Hops: 1, Direction: protocols.Clockwise, Epoch: n.epochs.Seen()})
		return
	case AlgPeterson:
		n.send(protocols.Message{Kind: protocols.MsgPetersonFirst, To: l, Round: n.pt.next(), Hops: 1, Epoch: n.epochs.Seen()})
		return
	}
	n.send(protocols.Message{Kind: protocols.MsgRingElect, To: l, Epoch: n.epochs.Seen()})
}

// SetCandidacy implements protocols.CandidacySetter (docs/health.md). An
// ineligible node does not put its id forward: it abstains from elections
// as a resigned leader does (relays every candidate, competes with none,
// usurps no lower leader) but follows and relays as usual; a candidate
// that turns ineligible abandons its round, and a leader resigns, keeping
// the lead only when it is alone on the ring. Priority ranks the node with
// its id; the other members learn a change from the Priority its messages
// carry. A node that turns eligible starts its preempt delay over.
func (n *Node) SetCandidacy(now protocols.Time, c protocols.Candidacy) {
	n.now = now
	prio, eligibility := highest.SetCandidacy(now, c, n.id, n.members, &n.ineligible, &n.stable, &n.abstain)
	if prio {
		n.log.Infow("ring: priority changed", "node", n.id, "priority", c.Priority)
	}
	if !eligibility {
		return
	}
	n.log.Infow("ring: candidacy changed", "node", n.id, "eligible", !c.Ineligible)
	if !n.ineligible {
		return
	}
	switch n.st {
	case stLeader:
		if err := n.Resign(now); err != nil {
			n.log.Infow("ring: ineligible but staying leader: alone on the ring", "node", n.id)
		}
	case stCandidate:
		n.st, n.leader = stFollower, protocols.None
		n.resetTimer()
	}
}

// Resign makes the leader step down and open an election without itself: it
// sends an election message with no candidate (LCR: clockwise; HS: a probe
// both ways), which its neighbours answer by running for themselves. Until a
// new leader is announced, or two election timeouts pass, it relays every
// candidate and competes with none; afterwards it does not preempt the
// leader that replaced it, though its id is higher, and takes part normally
// in the next election. It returns ErrNotLeader on a non-leader and
// ErrNoTransferTarget when no other member is live.
func (n *Node) Resign(now protocols.Time) error {
	if n.st != stLeader {
		return protocols.ErrNotLeader
	}
	if n.neighbor(protocols.Clockwise) == n.id {
		return protocols.ErrNoTransferTarget
	}
	n.now = now
	n.log.Infow("ring: resigning", "node", n.id)
	n.st = stFollower
	n.leader = protocols.None
	n.participant = true
	until := n.abstain.Begin(now, n.et)
	n.deadline, n.roundEnd = until, until
	switch n.alg {
	case AlgPeterson:
		// A round of its own, in which it relays.
		n.pt.join(n.pt.next(), false, n.id)
		n.send(protocols.Message{Kind: protocols.MsgPetersonFirst, To: n.neighbor(protocols.Clockwise),
			Round: n.pt.round, Hops: 1, Epoch: n.epochs.Seen()})
		return nil
	case AlgHS:
		for _, d := range []protocols.Direction{protocols.Clockwise, protocols.CounterClockwise} {
			n.send(protocols.Message{Kind: protocols.MsgHSProbe, To: n.neighbor(d), Hops: 1, Direction: d, Epoch: n.epochs.Seen()})
		}
		return nil
	}
	n.send(protocols.Message{Kind: protocols.MsgRingElect, To: n.neighbor(protocols.Clockwise), Epoch: n.epochs.Seen()})
	return nil
}

func (n *Node) role() protocols.Role {
	switch n.st {
	case stLeader:
		return protocols.Leader
	case stCandidate:
		return protocols.Candidate
	}
	return protocols.Follower
}

func (n *Node) softState() protocols.SoftState {
	return protocols.SoftState{Role: n.role(), Leader: n.leader, Epoch: n.epoch}
}

// Status reports the leader this node knows and its epoch. Ring elections
// have no lease: LeaseUntil is always zero and Term is the epoch.
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
