package sim

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The health nemesis (docs/health.md): nodes turn ineligible for
// leadership and back — for long spells, in quick flaps, and armed for the
// next node to persist, which lands in the middle of an election — while
// the schedule gives some nodes a higher priority, so that leaders hand
// over to preferred nodes and FaultCrash with TargetTransferTarget crashes
// a preferred node in the middle of such a transfer. The checker adds
// Checks.Health.

// InvHealth: a node was given leadership while ineligible.
const InvHealth = "leader-eligible"

// HealthFaults is ScheduledFaults plus health changes, twice as often as
// each other kind, for protocols that implement
// protocols.CandidacySetter (majority).
func HealthFaults() []FaultKind {
	return append(ScheduledFaults(), FaultHealth, FaultHealth)
}

// healthRun is a run's health state: each node's eligibility (a node in
// maintenance stays so across a crash, as the agent's maint file does) and
// the generation of the fault that set it.
type healthRun struct {
	ineligible []bool
	gen        []uint32
	// armed is one more than the index of the FaultHealth action waiting
	// for the next persist; 0 when none is.
	armed int
	// fire is one more than the node an armed fault picked, to be made
	// ineligible once its Ready is handled; 0 when none.
	fire int
	// told is the candidacy each node's protocol instance last got.
	told []protocols.Candidacy
	// leading records, per node, the epoch it last announced leading
	// (0: never): leadership is given when a node announces leading an
	// epoch it did not lead before.
	leading []uint64
	// won is, per node, the latest term in which it sent heartbeats as
	// leader (majority won it then) and wonEligible whether it was
	// eligible when it sent the first: in core mode a majority leader
	// announces leading only once its lease holds, which may come after
	// it turned ineligible, but it was given leadership when it won.
	won         []uint64
	wonEligible []bool
}

// drawPriorities gives the schedule's nodes priorities when health faults
// are scheduled, and reports whether they are; it draws nothing otherwise,
// so schedules without them replay as before.
func drawPriorities(rng *rand.Rand, o Options, s *Schedule) bool {
	if !slices.Contains(o.Faults, FaultHealth) {
		return false
	}
	s.Priorities = make([]uint8, s.Nodes)
	switch rng.IntN(3) {
	case 0: // all equal: health alone decides
	case 1: // one preferred node
		s.Priorities[rng.IntN(s.Nodes)] = 10
	default: // mixed
		for i := range s.Priorities {
			s.Priorities[i] = uint8(rng.IntN(3) * 5)
		}
	}
	return true
}

// healthAction draws a FaultHealth's target and duration.
func healthAction(rng *rand.Rand, et time.Duration) (int, time.Duration) {
	target := TargetRandom
	switch rng.IntN(3) {
	case 0:
		target = TargetLeader
	case 1:
		target = TargetNextPersist
	}
	if rng.IntN(2) == 0 { // a flap: back before anyone could notice much
		return target, randDur(rng, et/2)
	}
	return target, et + randDur(rng, 15*et)
}

func (r *run) healthInit() {
	if r.hl.ineligible == nil {
		n := len(r.nodes)
		r.hl = healthRun{ineligible: make([]bool, n), gen: make([]uint32, n), leading: make([]uint64, n), told: make([]protocols.Candidacy, n),
			won: make([]uint64, n), wonEligible: make([]bool, n)}
		for i := range n {
			r.hl.told[i] = r.candidacy(i) // what every instance got so far
		}
	}
}

// candidacy is node i's candidacy now.
func (r *run) candidacy(i int) protocols.Candidacy {
	var c protocols.Candidacy
	if i < len(r.sched.Priorities) {
		c.Priority = r.sched.Priorities[i]
	}
	if i < len(r.hl.ineligible) {
		c.Ineligible = r.hl.ineligible[i]
	}
	return c
}

// startCandidacy is node i's candidacy for a new protocol instance.
func (r *run) startCandidacy(i int) protocols.Candidacy {
	c := r.candidacy(i)
	if r.hl.told != nil {
		r.hl.told[i] = c
	}
	return c
}

// syncCandidacy tells n's protocol its candidacy if it changed since the
// protocol last heard: a paused process learns of a change when it runs
// again (at its next tick), as the agent's loop would.
func (r *run) syncCandidacy(n *node) {
	if r.hl.told == nil || n.p == nil || n.crashed || n.paused {
		return
	}
	c := r.candidacy(n.idx)
	if r.hl.told[n.idx] == c {
		return
	}
	r.hl.told[n.idx] = c
	if cs, ok := n.p.(protocols.CandidacySetter); ok {
		cs.SetCandidacy(r.local(n), c)
		r.drain(n)
	}
}

// setEligible changes node i's eligibility and tells its protocol.
func (r *run) setEligible(i int, ok bool, kind recKind) {
	r.healthInit()
	if r.hl.ineligible[i] == !ok {
		return
	}
	r.hl.ineligible[i] = !ok
	r.rec(traceRec{kind: kind, node: int32(i), a: uint64(FaultHealth), b: uint64(i)})
	// A crashed node reads it from NodeConfig on restart; a paused one at
	// its next tick.
	r.syncCandidacy(r.nodes[i])
}

func (r *run) healthFault(a Action, i int) {
	r.healthInit()
	if a.Target == TargetNextPersist {
		r.hl.armed = i + 1
		return
	}
	r.healthOn(a, i, r.target(a.Target))
}

// healthOn makes node tgt ineligible for action i and schedules its return.
func (r *run) healthOn(a Action, i, tgt int) {
	r.stats.Faults[FaultHealth]++
	r.hl.gen[tgt]++
	r.setEligible(tgt, false, recFault)
	r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(tgt), inc: r.hl.gen[tgt]})
}

func (r *run) healthUndo(tgt int, gen uint32) {
	if r.hl.gen[tgt] != gen {
		return // a later health fault on the node owns it now
	}
	r.setEligible(tgt, true, recUndo)
}

// healthPersisted fires an armed health fault on n, which just persisted.
func (r *run) healthPersisted(n *node) {
	if r.hl.armed > 0 && r.hl.fire == 0 && !r.healed {
		r.hl.fire = n.idx + 1
	}
}

// healthFire makes the node an armed health fault picked ineligible, now
// that its Ready is handled (SetCandidacy must not come between Ready and
// Advance).
func (r *run) healthFire() {
	if r.hl.fire == 0 || r.done {
		return
	}
	i, tgt := r.hl.armed-1, r.hl.fire-1
	r.hl.armed, r.hl.fire = 0, 0
	if !r.healed {
		r.healthOn(r.sched.Actions[i], i, tgt)
	}
}

// healthWon records when n wins a majority term: its first heartbeat
// as leader of it.
func (r *run) healthWon(n *node, m protocols.Message) {
	if !r.o.Checks.Health || m.Kind != protocols.MsgHeartbeat || m.Leader != n.member.ID {
		return
	}
	r.healthInit()
	if m.Term > r.hl.won[n.idx] {
		r.hl.won[n.idx], r.hl.wonEligible[n.idx] = m.Term, !r.hl.told[n.idx].Ineligible
	}
}

// transferSent arms a TargetTransferTarget crash for m's target.
func (r *run) transferSent(m protocols.Message) { r.armTransferCrash(int(m.To) - 1) }

// armTransferCrash arms a TargetTransferTarget crash for node i.
func (r *run) armTransferCrash(i int) {
	if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetTransferTarget && i >= 0 && i < len(r.nodes) {
		r.crashNext = i
	}
}

// handoverSent arms a TargetTransferTarget crash for bully's and ring's
// hand-overs, which send no TimeoutNow: the receiver of a resigning
// leader's opening (bully: an ELECTION to a member it outranks; ring: an
// election message without a candidate), and a member of higher rank
// taking leadership from a live leader (the sender of the first
// COORDINATOR or LEADER message while another node leads): a preferred
// node crashing in the middle of its hand-over.
func (r *run) handoverSent(n *node, m protocols.Message) {
	to := int(m.To) - 1
	switch m.Kind {
	case protocols.MsgElection:
		if to >= 0 && to < len(r.nodes) && r.outranks(n.idx, to) {
			r.armTransferCrash(to)
		}
	case protocols.MsgRingElect, protocols.MsgHSProbe, protocols.MsgPetersonFirst:
		if m.Candidate == protocols.None {
			r.armTransferCrash(to)
		}
	case protocols.MsgCoordinator, protocols.MsgRingLeader:
		if m.Hops <= 1 && r.curLead >= 0 && r.curLead != n.idx {
			r.armTransferCrash(n.idx)
		}
	}
}

// healthSoft checks that n, announcing ss, is not given leadership while
// its protocol knows it is ineligible.
func (r *run) healthSoft(n *node, ss protocols.SoftState, term uint64) {
	if !r.o.Checks.Health {
		return
	}
	r.healthInit()
	if ss.Role != protocols.Leader {
		// Not cleared: in core mode the status stops saying leader when
		// the lease lapses and says it again when a quorum answers, in
		// the same epoch; leadership was given once, when it was won.
		return
	}
	was := r.hl.leading[n.idx]
	r.hl.leading[n.idx] = ss.Epoch
	// Ineligible as its protocol was told: a paused process learns of a
	// change only when it runs again (its own checks do not run either).
	wonEligible := term != 0 && term == r.hl.won[n.idx] && r.hl.wonEligible[n.idx]
	if was != ss.Epoch && r.hl.told[n.idx].Ineligible && !wonEligible {
		r.violate(InvHealth, "n%d became leader of epoch %d while ineligible", n.idx+1, ss.Epoch)
	}
}

// healthHeal ends the health faults: each ineligible node stays so with
// probability one half, but at least one voter that holds the newest
// configuration is left eligible, so that liveness (an eligible leader
// every node follows) is owed.
func (r *run) healthHeal() {
	if r.hl.ineligible == nil {
		return
	}
	r.hl.armed, r.hl.fire = 0, 0
	for i := range r.nodes {
		r.hl.gen[i]++
		if r.hl.ineligible[i] && r.rng.IntN(2) == 0 {
			r.setEligible(i, true, recUndo)
		}
	}
	// The voters that matter are those of the newest configuration any
	// node holds (voter changes move them); before any, the initial ones.
	var newest protocols.Configuration
	for _, n := range r.nodes {
		for _, c := range []protocols.Configuration{n.hs.Config, n.st.Config} {
			if c.Voters != "" && (newest.Voters == "" || c.Compare(newest) > 0) {
				newest = c
			}
		}
	}
	first := -1
	for i, m := range r.mems {
		// A node that can win: a voter of the newest configuration that
		// holds it. A voter added by a change it never heard of cannot
		// campaign; if only ineligible nodes know of the change, nobody
		// leads until one of them is eligible again (docs/health.md).
		n := r.nodes[i]
		voter := slices.Contains(r.voters, m.Name)
		if newest.Voters != "" {
			voter = newest.Has(m.Name) && (n.hs.Config == newest || n.st.Config == newest)
		}
		if !voter {
			continue
		}
		if !r.hl.ineligible[i] {
			return
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		r.setEligible(first, true, recUndo)
	}
}
