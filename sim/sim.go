package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Invariant names, as they appear in Violation.Invariant.
const (
	InvSingleLeader   = "single-leader-per-epoch"
	InvAgree          = "agree-on-leader-of-epoch"
	InvEpochMonotonic = "epoch-monotonic"
	InvLease          = "lease"
	InvFencing        = "fencing"
	InvLiveness       = "liveness"
	InvVoteOnce       = "vote-once-per-term"
	// InvFailover: the core-mode failover probe missed Checks.FailoverBound.
	InvFailover = "failover"
	// Configuration invariants (Checks.Configurations).
	InvConfigHistory   = "config-version-unique"
	InvConfigCommitted = "config-committed-unique"
	InvConfigComplete  = "config-leader-complete"
	// InvDriver: the protocol broke the driver contract (a message with a
	// wrong From, a Ready that never empties, a restart the Factory refused).
	InvDriver = "driver"
)

// Violation is a broken invariant: the seed that replays it, what broke,
// and the tail of the trace leading to it.
type Violation struct {
	Seed      uint64
	Invariant string
	Detail    string
	// At is the virtual time of the violating event.
	At time.Duration
	// Nodes describes every node's state at the violation, one line each.
	Nodes []string
	// Trace is the last Options.TraceLen events, oldest first.
	Trace []string
}

// Error renders the violation with its seed, node states and trace.
func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sim: seed %d: invariant %s violated at %.6fs: %s\n", v.Seed, v.Invariant, v.At.Seconds(), v.Detail)
	b.WriteString("nodes:\n")
	for _, l := range v.Nodes {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "last %d events:\n", len(v.Trace))
	for _, l := range v.Trace {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// Result is the outcome of one run.
type Result struct {
	Seed     uint64
	Schedule Schedule
	Stats    Stats
	// Violation is nil when every invariant held.
	Violation *Violation
	// TraceHash fingerprints the whole event trace: same seed, same hash.
	TraceHash uint64
	// End is the virtual time the run stopped at.
	End time.Duration
	// Recovery is the virtual time from the heal to a leader every node
	// follows; -1 when not reached or not checked.
	Recovery time.Duration
}

type node struct {
	idx     int
	member  protocols.Member
	p       protocols.Protocol
	crashed bool
	paused  bool
	inc     uint32 // incarnation, bumped by every crash
	tickGen uint32 // current tick chain
	fault   uint32 // generation of the crash or pause in force
	hs      protocols.HardState
	rate    float64
	offset  int64
	pending []protocols.Message // buffered while paused
	cn      *coreNode           // core mode only (coremode.go)
	// resigned: an operator's Resign (FaultResign) took effect since the
	// node last started (Checks.Preferred).
	resigned bool

	maxEpoch uint64
	// cfgChecked is the (configuration, committed) pair checkConfig last
	// checked for this node: the checks of an unchanged pair cannot find
	// anything new, and the checker runs after every event.
	cfgChecked [2]protocols.Configuration
	lastKey    statusKey
	lastValid  bool
	st         protocols.Status

	// failure-detector model: since when each peer has been unheard
	// (suspicion) and unreachable both ways (gossip); -1 when fine.
	unheardSince []time.Duration
	unreachSince []time.Duration
	suspected    []bool
	down         []bool
}

type statusKey struct {
	role   protocols.Role
	leader protocols.ID
	epoch  uint64
}

type voteKey struct {
	voter int
	term  uint64
}

type claim struct {
	leader protocols.ID
	by     int32
	self   bool // the leader itself reported Role==Leader
}

type run struct {
	o     Options
	seed  uint64
	rng   *rand.Rand
	sched Schedule
	now   time.Duration
	q     queue
	nodes []*node
	mems  []protocols.Member
	conn  [][]bool // conn[from][to]

	partGen, slowGen   uint32
	dropProb, dupProb  float64
	longProb           float64
	minDelay, maxDelay time.Duration

	healed   bool
	healAt   time.Duration
	live     bool
	done     bool
	viol     *Violation
	leaderOf map[uint64]claim
	votes    map[voteKey]protocols.ID
	curLead  int
	writer   int // node to attempt a fenced write after this event, or -1
	// lastPersist is the node that persisted a HardState last, or -1.
	lastPersist int
	// armed is the crash action waiting for the next persist, or -1;
	// crashNext the node to crash at the end of the current event, or -1.
	armed, crashNext int

	fenceSet  bool
	fenceHigh uint64
	fenceNode int

	cfg configCheck
	hl  healthRun
	cm  *coreRun // core mode only (coremode.go)

	stats Stats
	trace traceRing
}

// Run draws a schedule from seed with RandomSchedule and runs it.
func Run(o Options, seed uint64) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{Seed: seed}, err
	}
	rng := newRand(seed)
	return runSchedule(o, seed, rng, RandomSchedule(rng, o))
}

// RunSchedule runs a given schedule; seed drives everything the schedule
// leaves open (delays, drops, targets, the protocols' generators).
func RunSchedule(o Options, seed uint64, s Schedule) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{Seed: seed}, err
	}
	if s.Nodes <= 0 {
		return Result{Seed: seed}, fmt.Errorf("sim: schedule has %d nodes", s.Nodes)
	}
	if len(s.ClockRates) != s.Nodes {
		s.ClockRates = make([]float64, s.Nodes)
		for i := range s.ClockRates {
			s.ClockRates[i] = 1
		}
	}
	return runSchedule(o, seed, newRand(seed), s)
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func runSchedule(o Options, seed uint64, rng *rand.Rand, s Schedule) (Result, error) {
	r, err := newRun(o, seed, rng, s)
	if err != nil {
		return Result{Seed: seed}, err
	}
	for i, a := range s.Actions {
		r.q.push(event{at: a.At, kind: evFault, arg: int32(i)})
	}
	r.q.push(event{at: s.FaultPhase, kind: evHeal})
	r.check()
	r.loop()
	res := Result{
		Seed: seed, Schedule: s, Stats: r.stats, Violation: r.viol,
		TraceHash: r.trace.hash, End: r.now, Recovery: -1,
	}
	res.Stats.VirtualTime = r.now
	if r.viol != nil {
		res.Stats.Violations = 1
	}
	if r.live {
		res.Recovery = r.now - r.healAt
	}
	return res, nil
}

// newRun sets up the nodes of schedule s, started and fully connected,
// with nothing queued: runSchedule adds the schedule's faults, RunFailover
// its one crash.
func newRun(o Options, seed uint64, rng *rand.Rand, s Schedule) (*run, error) {
	r := &run{
		o: o, seed: seed, rng: rng, sched: s,
		leaderOf:    make(map[uint64]claim),
		votes:       make(map[voteKey]protocols.ID),
		curLead:     -1,
		writer:      -1,
		lastPersist: -1,
		armed:       -1,
		crashNext:   -1,
		dropProb:    s.DropProb, dupProb: s.DupProb, longProb: s.LongDelayProb,
		minDelay: s.MinDelay, maxDelay: max(s.MaxDelay, s.MinDelay),
		trace: traceRing{buf: make([]traceRec, o.TraceLen), hash: fnvOffset},
	}
	r.stats.Schedules = 1
	n := s.Nodes
	r.mems = make([]protocols.Member, n)
	voters := max(n-o.Observers, 1)
	for i := range r.mems {
		r.mems[i] = protocols.Member{ID: protocols.ID(i + 1), Name: fmt.Sprintf("n%d", i+1), Voter: i < voters}
		if i < len(s.Priorities) {
			// As gossip publishes node.priority: bully and ring rank
			// members by it before they hear from them.
			r.mems[i].Priority = s.Priorities[i]
		}
	}
	r.conn = make([][]bool, n)
	for i := range r.conn {
		r.conn[i] = make([]bool, n)
	}
	r.connectAll()
	if o.Core != nil {
		r.cm = newCoreRun(n)
	}
	for i := range n {
		r.nodes = append(r.nodes, &node{
			idx: i, member: r.mems[i], rate: s.ClockRates[i],
			offset:       int64(time.Second) + rng.Int64N(int64(time.Hour)),
			unheardSince: make([]time.Duration, n),
			unreachSince: make([]time.Duration, n),
			suspected:    make([]bool, n),
			down:         make([]bool, n),
		})
	}
	for _, nd := range r.nodes {
		if r.cm != nil {
			nd.cn = &coreNode{}
		}
		if err := r.start(nd); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *run) connectAll() {
	for i := range r.conn {
		for j := range r.conn[i] {
			r.conn[i][j] = true
		}
	}
}

func (r *run) local(n *node) protocols.Time {
	return protocols.Time(n.offset + int64(float64(r.now)*n.rate))
}

func (r *run) rec(rc traceRec) {
	rc.at = r.now
	r.trace.add(rc)
	if r.o.Trace != nil {
		fmt.Fprintln(r.o.Trace, rc.String())
	}
}

// start builds n's protocol instance from its persisted state and feeds it
// the initial membership.
func (r *run) start(n *node) error {
	if n.cn != nil {
		return r.startCore(n)
	}
	cfg := NodeConfig{
		Self:              n.member,
		Members:           append([]protocols.Member(nil), r.mems...),
		HardState:         n.hs,
		Now:               r.local(n),
		Rand:              rand.New(rand.NewPCG(r.rng.Uint64(), r.rng.Uint64())),
		Candidacy:         r.startCandidacy(n.idx),
		ElectionTimeout:   r.o.ElectionTimeout,
		HeartbeatInterval: r.o.HeartbeatInterval,
		MaxClockDrift:     r.o.MaxClockDrift,
	}
	p, err := r.o.Factory(cfg)
	if err != nil {
		return fmt.Errorf("sim: factory for n%d: %w", n.idx+1, err)
	}
	n.p = p
	n.crashed, n.paused = false, false
	n.lastValid = false
	for i := range r.nodes {
		n.unheardSince[i], n.unreachSince[i] = -1, -1
		n.suspected[i], n.down[i] = false, false
	}
	now := r.local(n)
	for _, m := range r.mems {
		if m.ID != n.member.ID {
			p.MemberUp(now, m)
		}
	}
	r.drain(n)
	n.tickGen++
	r.q.push(event{at: r.now + randDur(r.rng, r.o.TickInterval) + 1, kind: evTick, node: int32(n.idx), inc: n.tickGen})
	return nil
}

func (r *run) violate(inv, format string, args ...any) {
	if r.viol != nil {
		return
	}
	v := &Violation{Seed: r.seed, Invariant: inv, Detail: fmt.Sprintf(format, args...), At: r.now}
	for _, n := range r.nodes {
		v.Nodes = append(v.Nodes, r.describe(n))
	}
	v.Trace = r.trace.lines()
	r.viol = v
	r.done = true
}

func (r *run) describe(n *node) string {
	s := fmt.Sprintf("n%d rate=%.5f persisted{term=%d vote=%d epoch=%d} max-epoch=%d", n.idx+1, n.rate, n.hs.Term, n.hs.Vote, n.hs.Epoch, n.maxEpoch)
	switch {
	case n.crashed:
		return s + " CRASHED"
	case n.paused:
		s += " PAUSED"
	}
	now := r.local(n)
	st := n.p.Status(now)
	lease := ""
	if st.LeaseUntil != 0 {
		lease = fmt.Sprintf(" lease-left=%v", st.LeaseUntil.Sub(now))
	}
	return s + fmt.Sprintf(" status{role=%s leader=%d epoch=%d term=%d%s}", st.Role, st.Leader, st.Epoch, st.Term, lease)
}

func (r *run) loop() {
	for r.q.len() > 0 && !r.done {
		ev := r.q.pop()
		r.now = ev.at
		r.stats.Events++
		switch ev.kind {
		case evDeliver:
			r.deliver(ev)
		case evTick:
			n := r.nodes[ev.node]
			if n.crashed || n.paused || ev.inc != n.tickGen {
				continue // stale timer: nothing happened, nothing to check
			}
			r.tick(n)
		case evFault:
			r.fault(int(ev.arg))
		case evUndo:
			r.undo(int(ev.arg), int(ev.node), ev.inc)
		case evHeal:
			r.heal()
		case evDeadline:
			if !r.live {
				r.violate(InvLiveness, "no leader followed by every node %v after the heal", r.o.Checks.LivenessBound)
			}
		case evStop:
			r.done = true
		case evSettled:
			if r.o.Checks.Preferred {
				r.checkPreferred()
			}
			r.done = true
		default:
			r.coreEvent(ev)
		}
		if r.crashNext >= 0 && !r.done {
			i, tgt := r.armed, r.crashNext
			r.armed, r.crashNext = -1, -1
			r.crashFault(r.sched.Actions[i], i, tgt)
		}
		if !r.done {
			r.check()
		}
	}
}

// drain handles n's Ready batches per the driver contract.
func (r *run) drain(n *node) {
	if n.cn != nil {
		r.drainCore(n)
		return
	}
	for i := 0; n.p != nil && n.p.HasReady(); i++ {
		if i > 1000 {
			r.violate(InvDriver, "n%d: HasReady still true after 1000 Ready/Advance rounds", n.idx+1)
			return
		}
		rd := n.p.Ready()
		if rd.HardState != nil {
			n.hs = *rd.HardState
			r.persistedConfig(n)
			r.lastPersist = n.idx
			if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextPersist {
				r.crashNext = n.idx
			}
			r.rec(traceRec{kind: recPersist, node: int32(n.idx), a: n.hs.Term, b: uint64(n.hs.Vote), c: n.hs.Epoch})
			r.healthPersisted(n)
		}
		for _, m := range rd.Messages {
			r.send(n, m)
			if m.Kind == protocols.MsgTimeoutNow {
				r.transferSent(m)
			}
			r.handoverSent(n, m)
			if m.Kind == protocols.MsgVoteResp && !m.Reject {
				r.voted(n, m)
				if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextVoteGrant {
					r.crashNext = n.idx
				}
			}
		}
		if rd.SoftState != nil {
			ss := *rd.SoftState
			r.rec(traceRec{kind: recSoft, node: int32(n.idx), a: uint64(ss.Role), b: uint64(ss.Leader), c: ss.Epoch})
			r.healthSoft(n, ss)
		}
		n.p.Advance(rd)
	}
	r.healthFire()
}

// voted records a granted vote and checks it is the node's only one in
// its term.
func (r *run) voted(n *node, m protocols.Message) {
	if !r.o.Checks.VoteOncePerTerm {
		return
	}
	k := voteKey{n.idx, m.Term}
	if prev, ok := r.votes[k]; ok && prev != m.To {
		r.violate(InvVoteOnce, "n%d granted its term-%d vote to n%d and to n%d", n.idx+1, m.Term, prev, m.To)
		return
	}
	r.votes[k] = m.To
}

func (r *run) send(n *node, m protocols.Message) {
	if m.From != n.member.ID {
		r.violate(InvDriver, "n%d sent a message with From=%d: %s", n.idx+1, m.From, m)
		return
	}
	r.stats.Messages++
	to := int(m.To) - 1
	if to < 0 || to >= len(r.nodes) {
		r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropBadDest, msg: m})
		return
	}
	if r.dropProb > 0 && r.rng.Float64() < r.dropProb {
		r.stats.Faults[FaultDrop]++
		r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropRandom, msg: m})
		return
	}
	copies := 1
	if r.dupProb > 0 && r.rng.Float64() < r.dupProb {
		r.stats.Faults[FaultDuplicate]++
		copies = 2
	}
	r.rec(traceRec{kind: recSend, node: int32(n.idx), a: uint64(copies), msg: m})
	for range copies {
		d := r.minDelay + randDur(r.rng, r.maxDelay-r.minDelay+1)
		if r.longProb > 0 && r.rng.Float64() < r.longProb {
			r.stats.Faults[FaultLongDelay]++
			d += r.o.ElectionTimeout + randDur(r.rng, 2*r.o.ElectionTimeout)
		}
		r.q.push(event{at: r.now + d, kind: evDeliver, node: int32(to), inc: r.nodes[to].inc, msg: m})
	}
}

func (r *run) deliver(ev event) {
	n := r.nodes[ev.node]
	m := ev.msg
	switch {
	case n.crashed || n.inc != ev.inc:
		r.rec(traceRec{kind: recDrop, node: ev.node, a: dropCrashed, msg: m})
	case !r.conn[m.From-1][ev.node]:
		r.rec(traceRec{kind: recDrop, node: ev.node, a: dropPartition, msg: m})
	case n.cn != nil && !r.admitted(n, m):
	case n.paused:
		r.rec(traceRec{kind: recQueue, node: ev.node, msg: m})
		n.pending = append(n.pending, m)
	default:
		r.step(n, m)
	}
}

func (r *run) step(n *node, m protocols.Message) {
	now := r.local(n)
	r.rec(traceRec{kind: recDeliver, node: int32(n.idx), local: now, msg: m})
	if err := n.p.Step(now, m); err != nil {
		r.rec(traceRec{kind: recStepErr, node: int32(n.idx), msg: m, err: err})
	}
	r.drain(n)
}

func (r *run) tick(n *node) {
	if n.cn != nil {
		r.tickCore(n)
		return
	}
	r.detect(n)
	if n.p == nil || r.done {
		return
	}
	if r.syncCandidacy(n); n.p == nil || r.done {
		return
	}
	now := r.local(n)
	r.rec(traceRec{kind: recTick, node: int32(n.idx), local: now})
	n.p.Tick(now)
	r.drain(n)
	if r.done {
		return
	}
	r.writer = n.idx // attempts its fenced write after the checker's pass
	d := time.Duration(float64(r.o.TickInterval) / n.rate)
	r.q.push(event{at: r.now + max(d, 1), kind: evTick, node: int32(n.idx), inc: n.tickGen})
}

// detect feeds n the failure detector's and gossip's verdicts: a peer is
// suspected once unheard for SuspectAfter and marked down once unreachable
// both ways for DownAfter.
func (r *run) detect(n *node) {
	if r.o.SuspectAfter < 0 && r.o.DownAfter < 0 {
		return
	}
	for i := range r.nodes {
		if i == n.idx {
			continue
		}
		r.detectPeer(n, i)
		r.drain(n)
	}
}

// detectPeer is one peer's turn of detect: n's verdicts on peer i.
func (r *run) detectPeer(n *node, i int) {
	now := r.local(n)
	p := r.nodes[i]
	up := !p.crashed && !p.paused
	heard := up && r.conn[i][n.idx]
	reach := heard && r.conn[n.idx][i]
	id := p.member.ID
	if r.o.SuspectAfter >= 0 {
		switch {
		case heard:
			n.unheardSince[i] = -1
			if n.suspected[i] {
				n.suspected[i] = false
				r.input(n, inputUnsuspect, i)
				n.p.Suspect(now, id, false)
			}
		case n.unheardSince[i] < 0:
			n.unheardSince[i] = r.now
		case !n.suspected[i] && r.now-n.unheardSince[i] >= r.o.SuspectAfter:
			n.suspected[i] = true
			r.input(n, inputSuspect, i)
			n.p.Suspect(now, id, true)
		}
	}
	if r.o.DownAfter >= 0 {
		switch {
		case reach:
			n.unreachSince[i] = -1
			if n.down[i] {
				n.down[i] = false
				r.input(n, inputUp, i)
				n.p.MemberUp(now, p.member)
			}
		case n.unreachSince[i] < 0:
			n.unreachSince[i] = r.now
		case !n.down[i] && r.now-n.unreachSince[i] >= r.o.DownAfter:
			n.down[i] = true
			r.input(n, inputDown, i)
			n.p.MemberDown(now, id)
		}
	}
}

func (r *run) input(n *node, kind, peer int) {
	r.rec(traceRec{kind: recInput, node: int32(n.idx), a: uint64(kind), b: uint64(peer)})
}

// write is a leader's attempt on the fenced resource, which keeps the
// highest epoch it accepted and refuses lower ones.
func (r *run) write(n *node, epoch uint64) {
	switch {
	case r.fenceSet && epoch < r.fenceHigh:
		r.stats.FencedRejected++
		r.rec(traceRec{kind: recWrite, node: int32(n.idx), a: epoch})
		return
	case r.fenceSet && epoch == r.fenceHigh && r.fenceNode != n.idx:
		if r.o.Checks.Fencing {
			r.violate(InvFencing, "fenced resource accepted epoch %d from n%d and from n%d", epoch, r.fenceNode+1, n.idx+1)
			return
		}
	}
	r.stats.FencedWrites++
	if !r.fenceSet || epoch != r.fenceHigh || r.fenceNode != n.idx {
		r.rec(traceRec{kind: recWrite, node: int32(n.idx), a: epoch, b: 1})
	}
	r.fenceSet, r.fenceHigh, r.fenceNode = true, epoch, n.idx
}

func (r *run) crash(n *node) {
	n.p = nil
	if n.cn != nil {
		n.cn.c = nil
	}
	n.crashed, n.paused = true, false
	n.resigned = false
	n.pending = nil
	n.inc++
	n.tickGen++
	n.lastValid = false
}

func (r *run) restart(n *node) {
	if err := r.start(n); err != nil {
		r.violate(InvDriver, "restart of n%d from persisted %+v: %v", n.idx+1, n.hs, err)
	}
}

func (r *run) resume(n *node) { r.resumeWith(n, r.tick) }

// resumeWith wakes paused node n: it ticks (through tick) before or after
// stepping the messages queued while it was frozen, drawn at random. It
// reports false when it stopped early, the run done or the node gone.
func (r *run) resumeWith(n *node, tick func(*node)) bool {
	n.paused = false
	pend := n.pending
	n.pending = nil
	n.tickGen++
	tickFirst := r.rng.IntN(2) == 0
	if tickFirst {
		tick(n)
	}
	for _, m := range pend {
		if r.done || n.p == nil {
			return false
		}
		r.step(n, m)
	}
	if !tickFirst && !r.done {
		tick(n)
	}
	return true
}

// target resolves an Action's Target to a node index.
func (r *run) target(t int) int {
	n := len(r.nodes)
	switch {
	case t == TargetLeader && r.curLead >= 0:
		return r.curLead
	case t == TargetLastPersisted && r.lastPersist >= 0:
		return r.lastPersist
	case t < 0:
		return r.rng.IntN(n)
	}
	return t % n
}

func (r *run) fault(i int) {
	if r.healed {
		return
	}
	a := r.sched.Actions[i]
	n := len(r.nodes)
	tgt := -1
	undo := event{at: r.now + a.Duration, kind: evUndo, arg: int32(i)}
	switch a.Kind {
	case FaultSplit:
		perm := r.rng.Perm(n)
		k := 1 + r.rng.IntN(max((n-1)/2, 1))
		r.partition(perm[:k], perm[k:], true)
	case FaultIsolateLeader:
		tgt = r.target(a.Target)
		rest := make([]int, 0, n-1)
		for j := range n {
			if j != tgt {
				rest = append(rest, j)
			}
		}
		r.partition([]int{tgt}, rest, true)
	case FaultBridge:
		tgt = r.target(a.Target)
		others := make([]int, 0, n-1)
		for _, j := range r.rng.Perm(n) {
			if j != tgt {
				others = append(others, j)
			}
		}
		h := len(others) / 2
		r.partition(others[:h], others[h:], true)
	case FaultOneWay:
		perm := r.rng.Perm(n)
		k := 1 + r.rng.IntN(n-1)
		r.partition(perm[:k], perm[k:], false)
	case FaultCrash:
		if a.Target == TargetNextPersist || a.Target == TargetNextVoteGrant || a.Target == TargetTransferTarget {
			r.armed = i
			return
		}
		r.crashFault(a, i, r.target(a.Target))
		return
	case FaultPause:
		tgt = r.target(a.Target)
		nd := r.nodes[tgt]
		if nd.crashed || nd.paused {
			return
		}
		nd.paused = true
		nd.fault++
		undo.inc = nd.fault
	case FaultSlowNetwork:
		et := r.o.ElectionTimeout
		r.maxDelay = max(r.sched.MaxDelay, r.minDelay) + et/2 + randDur(r.rng, 5*et/2)
		r.slowGen++
		undo.inc = r.slowGen
	case FaultResign:
		if r.curLead < 0 {
			return
		}
		tgt = r.curLead
		nd := r.nodes[tgt]
		if nd.crashed || nd.paused {
			return
		}
		r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(a.Kind), b: uint64(int64(tgt))})
		r.stats.Faults[a.Kind]++
		if err := nd.p.Resign(r.local(nd)); err != nil {
			r.rec(traceRec{kind: recStepErr, node: int32(tgt), err: err})
		} else {
			nd.resigned = true
		}
		r.drain(nd)
		return
	case FaultPoison:
		r.poison(a, r.target(a.Target))
		return
	case FaultVoterChange:
		r.voterChange()
		return
	case FaultHealth:
		r.healthFault(a, i)
		return
	case FaultRestartNewPeer, FaultLeave:
		r.coreFault(a, i, r.target(a.Target))
		return
	case FaultPauseGroup:
		r.pauseGroup(a, i)
		return
	default:
		return
	}
	r.stats.Faults[a.Kind]++
	r.rec(traceRec{kind: recFault, node: int32(max(tgt, 0)), a: uint64(a.Kind), b: uint64(int64(tgt))})
	undo.node = int32(max(tgt, 0))
	if a.Kind == FaultSplit || a.Kind == FaultIsolateLeader || a.Kind == FaultBridge || a.Kind == FaultOneWay {
		undo.inc = r.partGen
	}
	r.q.push(undo)
}

// pauseGroup freezes every node, or a random group of two to n−1 of
// them, for a.Duration: one undo event per node, all at one instant, so
// they resume together in index order.
func (r *run) pauseGroup(a Action, i int) {
	n := len(r.nodes)
	k := n
	if n > 2 && r.rng.IntN(2) == 0 {
		k = 2 + r.rng.IntN(n-2)
	}
	in := make([]bool, n)
	for _, j := range r.rng.Perm(n)[:k] {
		in[j] = true
	}
	paused := false
	for j, nd := range r.nodes {
		if !in[j] || nd.crashed || nd.paused {
			continue
		}
		nd.paused = true
		nd.fault++
		paused = true
		r.rec(traceRec{kind: recFault, node: int32(j), a: uint64(FaultPauseGroup), b: uint64(j)})
		r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(j), inc: nd.fault})
	}
	if paused {
		r.stats.Faults[FaultPauseGroup]++
	}
}

// poison makes node tgt send a heartbeat carrying a.Value to every other
// node, through the network model like any message it sends.
func (r *run) poison(a Action, tgt int) {
	nd := r.nodes[tgt]
	if nd.crashed || nd.paused {
		return
	}
	r.stats.Faults[FaultPoison]++
	r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(FaultPoison), b: uint64(tgt), c: a.Value})
	id := nd.member.ID
	epoch := a.Value&^uint64(protocols.MaxEpochID) | uint64(id)
	for _, m := range r.mems {
		if m.ID == id {
			continue
		}
		r.send(nd, protocols.Message{Kind: protocols.MsgHeartbeat, From: id, To: m.ID, Leader: id, Term: a.Value, Epoch: epoch})
	}
}

// crashFault crashes node tgt for action i and schedules its restart.
func (r *run) crashFault(a Action, i, tgt int) {
	nd := r.nodes[tgt]
	if nd.crashed || r.healed {
		return
	}
	r.crash(nd)
	nd.fault++
	r.stats.Faults[FaultCrash]++
	r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(FaultCrash), b: uint64(tgt)})
	r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(tgt), inc: nd.fault})
}

// partition cuts every link from a to b, and from b to a when both.
func (r *run) partition(a, b []int, both bool) {
	r.connectAll()
	for _, i := range a {
		for _, j := range b {
			r.conn[i][j] = false
			if both {
				r.conn[j][i] = false
			}
		}
	}
	r.partGen++
}

func (r *run) undo(i, tgt int, gen uint32) {
	if r.healed {
		return
	}
	a := r.sched.Actions[i]
	switch a.Kind {
	case FaultSplit, FaultIsolateLeader, FaultBridge, FaultOneWay:
		if gen != r.partGen {
			return // a later partition replaced this one
		}
		r.connectAll()
	case FaultCrash, FaultPause, FaultPauseGroup:
		nd := r.nodes[tgt]
		if nd.fault != gen || (a.Kind == FaultCrash && !nd.crashed) || (a.Kind != FaultCrash && !nd.paused) {
			return // already undone by a later fault or restart
		}
		r.rec(traceRec{kind: recUndo, node: int32(tgt), a: uint64(a.Kind), b: uint64(int64(tgt))})
		if a.Kind == FaultCrash {
			r.restart(nd)
		} else {
			r.resume(nd)
		}
		return
	case FaultSlowNetwork:
		if gen != r.slowGen {
			return
		}
		r.maxDelay = max(r.sched.MaxDelay, r.minDelay)
	case FaultHealth:
		r.healthUndo(tgt, gen)
		return
	case FaultRestartNewPeer, FaultLeave:
		r.coreUndo(a, tgt, gen)
		return
	default:
		return
	}
	r.rec(traceRec{kind: recUndo, a: uint64(a.Kind), b: ^uint64(0)})
}

func (r *run) heal() {
	r.rec(traceRec{kind: recHeal, b: ^uint64(0)})
	r.healed, r.healAt = true, r.now
	r.connectAll()
	r.dropProb, r.dupProb, r.longProb = 0, 0, 0
	r.maxDelay = max(r.sched.MaxDelay, r.minDelay)
	r.healthHeal()
	for _, n := range r.nodes {
		switch {
		case n.crashed:
			r.restart(n)
		case n.paused:
			r.resume(n)
		}
		if r.done {
			return
		}
	}
	if b := r.o.Checks.LivenessBound; b > 0 {
		r.q.push(event{at: r.now + b, kind: evDeadline})
	} else {
		r.q.push(event{at: r.now + 20*r.o.ElectionTimeout, kind: evStop})
	}
}

// check verifies the invariants over every live node: O(nodes) per event,
// with the epoch map consulted only when a node's view changed.
func (r *run) check() {
	c := &r.o.Checks
	if r.cm != nil && r.cm.probe != probeNone {
		defer r.checkProbe()
	}
	leaders, first := 0, -1
	for _, n := range r.nodes {
		if n.crashed {
			continue
		}
		st := n.p.Status(r.local(n))
		n.st = st
		if st.Role == protocols.Leader {
			leaders++
			if leaders == 1 {
				first = n.idx
			} else if c.Lease {
				r.violate(InvLease, "n%d and n%d both report a valid lease (epochs %d and %d)", first+1, n.idx+1, r.nodes[first].st.Epoch, st.Epoch)
				return
			}
		}
		if st.Epoch < n.maxEpoch {
			if c.EpochMonotonic {
				r.violate(InvEpochMonotonic, "n%d's epoch went back from %d to %d", n.idx+1, n.maxEpoch, st.Epoch)
				return
			}
		} else {
			n.maxEpoch = st.Epoch
		}
		if c.Configurations && (n.cfgChecked != [2]protocols.Configuration{st.Config, st.Committed}) {
			n.cfgChecked = [2]protocols.Configuration{st.Config, st.Committed}
			if r.checkConfig(n, st); r.done {
				return
			}
		}
		key := statusKey{st.Role, st.Leader, st.Epoch}
		if !n.lastValid || key != n.lastKey {
			n.lastKey, n.lastValid = key, true
			if r.claims(n, st); r.done {
				return
			}
		}
	}
	r.curLead = first
	if w := r.writer; w >= 0 {
		r.writer = -1
		if n := r.nodes[w]; !n.crashed && n.st.Role == protocols.Leader {
			if r.write(n, n.st.Epoch); r.done {
				return
			}
		}
	}
	if r.healed && !r.live && c.LivenessBound > 0 && leaders == 1 && (!c.Health || !r.candidacy(first).Ineligible) {
		l := r.nodes[first].st
		for _, n := range r.nodes {
			if n.crashed || n.paused || n.st.Leader != r.nodes[first].member.ID || n.st.Epoch != l.Epoch {
				return
			}
		}
		r.live = true
		switch {
		case c.Settle > 0 && (r.cm == nil || c.FailoverBound <= 0):
			r.q.push(event{at: r.now + c.Settle, kind: evSettled})
		default:
			r.done = r.cm == nil || !r.startProbe(first, l.Epoch)
		}
		r.rec(traceRec{kind: recLive, node: int32(first), a: l.Epoch})
	}
}

// claims records and cross-checks who n says leads st.Epoch.
func (r *run) claims(n *node, st protocols.Status) {
	c := &r.o.Checks
	self := st.Role == protocols.Leader
	who := st.Leader
	if self {
		if who != protocols.None && who != n.member.ID && c.AgreeOnLeaderOfEpoch {
			r.violate(InvAgree, "n%d reports Role=leader but Leader=%d in epoch %d", n.idx+1, who, st.Epoch)
			return
		}
		who = n.member.ID
	}
	if who == protocols.None {
		return
	}
	prev, ok := r.leaderOf[st.Epoch]
	switch {
	case !ok:
		r.leaderOf[st.Epoch] = claim{leader: who, by: int32(n.idx), self: self}
		if self {
			r.elected(n, st.Epoch)
		}
	case prev.leader == who:
		if self && !prev.self {
			prev.self = true
			r.leaderOf[st.Epoch] = prev
			r.elected(n, st.Epoch)
		}
	case self && prev.self:
		if c.SingleLeaderPerEpoch {
			r.violate(InvSingleLeader, "n%d and n%d both led epoch %d", prev.leader, n.idx+1, st.Epoch)
		}
	default:
		if c.AgreeOnLeaderOfEpoch {
			r.violate(InvAgree, "n%d says n%d leads epoch %d, but n%d said n%d", n.idx+1, who, st.Epoch, prev.by+1, prev.leader)
		}
	}
}

func (r *run) elected(n *node, epoch uint64) {
	if r.o.Checks.Configurations {
		if r.checkLeaderConfig(n, n.st); r.done {
			return
		}
	}
	r.stats.Elections++
	r.rec(traceRec{kind: recLeader, node: int32(n.idx), a: epoch})
}
