package ring

import (
	"math"
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

// Peterson's unidirectional election (Peterson 1982; Dolev, Klawe and Rodeh
// 1982), on the clockwise ring LCR uses. The nodes taking part in a round
// are active or relays. An active node holds a temporary id (tid, its own
// id at first) and runs phases: it sends its tid clockwise (FIRST), passes
// on the tid it receives from the nearest active node behind it (SECOND),
// and of the three values — the one it received first, its own, the one
// it received second — it stays active only if the first is the largest,
// adopting it as its tid; otherwise it relays from then on. No two
// neighbouring active nodes both stay, so each phase at least halves them,
// and the highest value always stays: at most ⌊log₂ n⌋ phases of 2n
// messages, then a last one of n in which the one active node left gets
// its own tid back. That tid is the round's highest-ranked candidate,
// which need not be this node (a tid moves clockwise as it is adopted): it
// sends WINNER on to the candidate, which creates its epoch and announces
// itself as LCR's winner does. 2n⌊log₂ n⌋ + O(n) messages in the worst
// case, against LCR's n(n+1)/2 and HS's 8n(1+⌈log₂ n⌉)
// (docs/bully-ring.md).
//
// What the textbook leaves out, and this adds:
//
//   - Rounds. A round number travels in every message, so that a stalled
//     round restarted by the timer, or a round started by a node that
//     missed the current one, replaces it everywhere instead of mixing
//     with it: a node taking part in a round ignores older rounds' messages
//     and leaves its round for a newer one.
//   - Joining. A node that is not taking part joins the round of the
//     first message it receives: as a relay if it is ineligible (or has
//     resigned) or the message carries a value of higher rank — it cannot
//     win, the owner of that value took part as an active node — and
//     otherwise as an active node, sending its own FIRST, as long as the
//     round is still in phase 0. A node of higher rank that missed phase 0
//     starts a new round, so that it is not left out.
//   - Order. Messages that arrive before the active node reaches their
//     phase are held until it does (or passed on if it turns relay), older
//     phases' messages dropped.
//   - Everything else as LCR: ranks by (priority, id), epochs, abstention,
//     the stalled-round timer, re-sending past a lost successor, and never
//     routing a message past the member whose id it carries (toward).
//     Values of members known down rank below every other, so a dead
//     member's id dies out of the round instead of winning it.

// maxPhase bounds the phase of a Peterson message (and of an HS probe):
// a ring of MaxID members needs at most 20.
const maxPhase = 31

// peterson is a node's part in the current Peterson round.
type peterson struct {
	seen   uint64 // highest round seen; a new round starts above it
	round  uint64 // the round this node takes part in (while participant)
	active bool   // active in round; otherwise a relay
	tid    protocols.ID
	phase  uint32
	first  protocols.ID // value of this phase's FIRST; None until it came
	// early holds this round's messages for a phase this active node has
	// not reached, at most one of each kind and phase.
	early []protocols.Message
}

// next returns the number of a new round, above every round seen.
func (p *peterson) next() uint64 {
	if p.seen < math.MaxUint64 {
		p.seen++
	}
	return p.seen
}

// join makes this node take part in round r, as an active node with its
// own id or as a relay.
func (p *peterson) join(r uint64, active bool, self protocols.ID) {
	*p = peterson{seen: max(p.seen, r), round: r, active: active}
	if active {
		p.tid = self
	}
}

// outranks reports whether value a ranks above value b. A value whose
// member is known down, or unknown, ranks below every other.
func (n *Node) outranks(a, b protocols.ID) bool {
	if ga, gb := n.candidateGone(a), n.candidateGone(b); ga || gb {
		return !ga && gb
	}
	return n.members.Above(a, b)
}

// sendPeterson sends a Peterson message of this node's round carrying
// value v clockwise: to the next live member, or to v's own member if it
// comes first (toward). Nothing goes to this node itself.
func (n *Node) sendPeterson(k protocols.MessageKind, v protocols.ID, phase, hops uint32) {
	to := n.toward(protocols.Clockwise, v)
	if to == n.id {
		return
	}
	n.send(protocols.Message{Kind: k, To: to, Candidate: v, Phase: phase, Round: n.pt.round,
		Hops: hops, Epoch: n.epochs.Seen()})
}

// activate puts this node's id forward in round r, as an active node in
// phase 0. The caller has made it a candidate.
func (n *Node) activate(r uint64) {
	n.pt.join(r, true, n.id)
	n.sendPeterson(protocols.MsgPetersonFirst, n.id, 0, 1)
}

// stepPeterson handles a FIRST or SECOND message.
func (n *Node) stepPeterson(m protocols.Message) {
	c := m.Candidate
	if m.Round == 0 || m.Hops == 0 || m.Hops >= n.maxHops() || m.Phase > maxPhase || n.predatesLeadership(m) {
		return
	}
	if c == protocols.None && (m.Kind != protocols.MsgPetersonFirst || m.Phase != 0) {
		return
	}
	n.pt.seen = max(n.pt.seen, m.Round)
	switch {
	case n.participant && m.Round < n.pt.round:
		return // an older round's
	case !n.participant || m.Round > n.pt.round:
		if !n.enter(m) {
			return
		}
	}
	if c == protocols.None {
		// An opening without a candidate (Resign, nudge): the node it
		// woke runs, an abstaining one drops it, as in LCR.
		return
	}
	if n.outranks(c, n.id) && n.st == stCandidate {
		n.st = stFollower
	}
	if !n.pt.active {
		n.sendPeterson(m.Kind, c, m.Phase, m.Hops+1)
		return
	}
	if m.Phase < n.pt.phase || (m.Phase == n.pt.phase && m.Kind == protocols.MsgPetersonFirst && n.pt.first != protocols.None) {
		return // an older phase's, or a duplicate
	}
	if !slices.ContainsFunc(n.pt.early, func(e protocols.Message) bool { return e.Kind == m.Kind && e.Phase == m.Phase }) {
		n.pt.early = append(n.pt.early, m)
	}
	n.advance()
}

// enter makes this node take part in m's round, which it did not: as a
// relay when it cannot win (it abstains, or m carries a value of higher
// rank), as an active node while the round is in phase 0, and otherwise
// — it outranks the value, and the round went on without it — by starting
// a new round. It reports whether m belongs to the round it now takes
// part in.
func (n *Node) enter(m protocols.Message) bool {
	c := m.Candidate
	switch {
	case n.abstaining() || (c != protocols.None && n.outranks(c, n.id)):
		n.pt.join(m.Round, false, n.id)
		n.participant = true
		n.roundEnd = n.timeout()
		if n.st == stCandidate {
			n.st = stFollower
		}
		return true
	case m.Phase == 0 && m.Kind == protocols.MsgPetersonFirst:
		n.startElectionIn(m.Round)
		return n.participant && n.pt.round == m.Round
	default:
		n.startElection()
		return false
	}
}

// advance runs this active node's phases on the messages it holds: the
// phase's FIRST, then its SECOND, phase after phase.
func (n *Node) advance() {
	for n.pt.active {
		want := protocols.MsgPetersonFirst
		if n.pt.first != protocols.None {
			want = protocols.MsgPetersonSecond
		}
		i := slices.IndexFunc(n.pt.early, func(e protocols.Message) bool { return e.Kind == want && e.Phase == n.pt.phase })
		if i < 0 {
			return
		}
		v := n.pt.early[i].Candidate
		n.pt.early = slices.Delete(n.pt.early, i, i+1)
		if want == protocols.MsgPetersonFirst {
			n.gotFirst(v)
		} else {
			n.gotSecond(v)
		}
	}
}

// gotFirst handles value v, the tid of the nearest active node behind
// this one: this node passes it on as its SECOND, unless it is its own
// tid, which went all the way round: no other node is active, and the tid
// is the round's winner.
func (n *Node) gotFirst(v protocols.ID) {
	if v == n.pt.tid {
		n.pt.active, n.pt.early = false, nil
		n.won(v)
		return
	}
	n.pt.first = v
	n.sendPeterson(protocols.MsgPetersonSecond, v, n.pt.phase, 1)
}

// gotSecond decides the phase: this node stays active with the value it
// received first if that is the largest of the three, and otherwise
// relays, passing on what it holds for later phases.
func (n *Node) gotSecond(v protocols.ID) {
	f := n.pt.first
	if n.outranks(f, n.pt.tid) && n.outranks(f, v) && n.pt.phase < maxPhase {
		n.pt.tid, n.pt.first = f, protocols.None
		n.pt.phase++
		n.sendPeterson(protocols.MsgPetersonFirst, f, n.pt.phase, 1)
		return
	}
	n.pt.active = false
	early := n.pt.early
	n.pt.early = nil
	for _, m := range early {
		n.sendPeterson(m.Kind, m.Candidate, m.Phase, m.Hops+1)
	}
}

// won ends the round in which candidate c is the winner: this node leads
// if c is its own id (and it may), and otherwise tells c.
func (n *Node) won(c protocols.ID) {
	if c != n.id {
		if !n.candidateGone(c) {
			n.sendPeterson(protocols.MsgPetersonWinner, c, n.pt.phase, 1)
		}
		return
	}
	if n.st == stCandidate && !n.abstaining() {
		n.becomeLeader()
	}
}

// stepWinner passes WINNER on to its candidate, which becomes the leader
// if it still takes part in that round as a candidate. A node that did not
// take part and outranks the winner starts a new round instead, so that
// it is not left out.
func (n *Node) stepWinner(m protocols.Message) {
	c := m.Candidate
	if m.Round == 0 || m.Hops == 0 || m.Hops >= n.maxHops() || n.candidateGone(c) || n.predatesLeadership(m) {
		return
	}
	n.pt.seen = max(n.pt.seen, m.Round)
	inRound := n.participant && m.Round == n.pt.round
	switch {
	case n.participant && m.Round < n.pt.round:
		return
	case c == n.id:
		if inRound {
			n.won(c)
		}
		return
	case !inRound && !n.abstaining() && n.outranks(n.id, c):
		n.startElection()
		return
	case !inRound:
		n.pt.join(m.Round, false, n.id)
		n.participant = true
		n.roundEnd = n.timeout()
	}
	if n.st == stCandidate {
		n.st = stFollower
	}
	n.sendPeterson(protocols.MsgPetersonWinner, c, m.Phase, m.Hops+1)
}
