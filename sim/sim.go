package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

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
	// frames holds, per peer, the frame this node last sent it
	// (several elections only: loop.go frameDelay).
	frames []frame
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

type run struct {
	o     Options
	seed  uint64
	rng   *rand.Rand
	sched Schedule
	now   time.Duration
	q     queue
	nodes []*node
	mems  []protocols.Member
	// voters names the nodes that start as voters (the rest observe).
	voters []string
	conn   [][]bool // conn[from][to]

	partGen, slowGen   uint32
	dropProb, dupProb  float64
	longProb           float64
	minDelay, maxDelay time.Duration

	healed bool
	healAt time.Duration
	// calmSince is when the last fault, undo or heal happened; lateUntil
	// the latest arrival of a message sent slower than the schedule's
	// normal delays. The isolation window needs both behind it
	// (isolation.go).
	calmSince, lateUntil time.Duration
	live                 bool
	done                 bool
	viol                 *Violation
	leaderOf             map[uint64]claim
	votes                map[voteKey]protocols.ID
	curLead              int
	writer               int // node to attempt a fenced write after this event, or -1
	// lastPersist is the node that persisted a HardState last, or -1.
	lastPersist int
	// armed is the crash action waiting for the next persist, or -1;
	// crashNext the node to crash at the end of the current event, or -1.
	armed, crashNext int

	fence fence

	cfg configCheck
	hl  healthRun
	cm  *coreRun // core mode only (coremode.go)
	// el is the named elections' checker state (Options.Elections,
	// elections.go); iso the isolation watch (Checks.Isolation).
	el  []*elRun
	iso isoWatch
	// isoProbed: the isolation probe ran (sessions.go).
	isoProbed bool

	stats Stats
	trace traceRing
}

// Run draws a schedule from seed with RandomSchedule, adds the address
// faults Options.Faults names from a stream of their own
// (FaultWipedRestart, FaultSeedSplit), and runs it.
func Run(o Options, seed uint64) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{Seed: seed}, err
	}
	rng := newRand(seed)
	s := RandomSchedule(rng, o)
	drawMemberFaults(seed, o, &s)
	return runSchedule(o, seed, rng, s)
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
		r.mems[i] = protocols.Member{ID: protocols.ID(i + 1), Name: fmt.Sprintf("n%d", i+1)}
		if i < voters {
			r.voters = append(r.voters, r.mems[i].Name)
		}
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
		r.cm.rejoin = slices.ContainsFunc(s.Actions, func(a Action) bool { return memberFault(a.Kind) })
		r.initElections()
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
			for range r.el {
				nd.cn.els = append(nd.cn.els, &elNode{})
			}
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
		Voters:            r.voters,
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
