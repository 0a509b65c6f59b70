package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Errors of RunFailover when there was no leader to crash: the cluster did
// not keep one leader for Failover.Settle within Failover.Limit of virtual
// time, or within Failover.MaxEvents events.
var (
	ErrNoStableLeader = errors.New("sim: no stable leader within the time limit")
	ErrEventLimit     = errors.New("sim: event limit reached before a stable leader")
)

// Failover configures RunFailover: a fault-free cluster of any size elects
// a leader, keeps it for Settle, loses it to a crash (never restarted), and
// elects the next one. Nothing else goes wrong: no partitions, drops,
// duplicates, or pauses other than the Stall fields'; clocks drift within
// Options.MaxClockDrift.
type Failover struct {
	// Nodes is the cluster size, at least 2. Unlike Options.Nodes, which
	// keeps random schedules small, it has no upper bound.
	Nodes int
	// MinDelay and MaxDelay bound every message's uniformly random one-way
	// delay. Defaults 1ms and 2ms.
	MinDelay, MaxDelay time.Duration
	// Settle is how long every node must have agreed on one leader before
	// it is crashed. Default one election timeout. The crash then comes a
	// random part of a heartbeat interval later, anywhere in the leader's
	// heartbeat cycle.
	Settle time.Duration
	// Limit bounds the virtual time of each of the two phases (a stable
	// leader; agreement after the crash). Default one minute.
	Limit time.Duration
	// MaxEvents, when positive, bounds the events of each phase as well
	// (a message storm).
	MaxEvents int64
	// FullCheck runs the simulator's own pass after every event, which asks
	// every node for its Status and feeds every node's failure detector
	// every peer: O(Nodes) per event and per tick. Without it only the node
	// an event touched is checked and only crashed peers are fed to the
	// detector, which is equivalent here (every other peer is always heard)
	// and O(1). Both enforce the same invariants, except that a lease
	// overlap is seen only at an event of one of the two leaders; FullCheck
	// is there to cross-check.
	FullCheck bool
	// OnCrash and OnAgreed, when set, are called right after the crash and
	// right when the survivors agree, so that the caller can read its wall
	// clock around the election. They must not touch the run.
	OnCrash, OnAgreed func()
	// Stall, when positive, freezes survivors' processes together, as a
	// host overload, a VM pause or SIGSTOP of a host group would: StallAfter
	// after the crash, and again every StallEvery (when positive) until
	// they agree, every one of them stops for Stall at the same instant and
	// resumes at the same instant (the simulator's pause: no ticks, inbound
	// messages queued and delivered on resume, clocks running on).
	// StallNodes is how many survivors stall, drawn from the run's seed at
	// each stall; zero means all of them.
	Stall, StallAfter, StallEvery time.Duration
	StallNodes                    int
}

// FailoverResult is what RunFailover measured.
type FailoverResult struct {
	// Seed is the run's seed: the same seed and options replay it exactly.
	Seed uint64
	// Leader and Epoch are the stable leader that was crashed.
	Leader protocols.ID
	Epoch  uint64
	// CrashAt is the virtual time of the crash since the start of the run.
	CrashAt time.Duration
	// Agreed reports whether every survivor came to follow one live leader
	// within the limits; NewLeader and NewEpoch are that leader.
	Agreed    bool
	NewLeader protocols.ID
	NewEpoch  uint64
	// Elapsed is the virtual time from the crash to agreement, or to
	// giving up.
	Elapsed time.Duration
	// Suspected is the virtual time from the crash to the first Suspect
	// input about the leader on any survivor, -1 when agreement (or giving
	// up) came first.
	Suspected time.Duration
	// Sent counts the messages sent from the crash to agreement, by kind.
	Sent map[protocols.MessageKind]int64
	// Events is the number of events processed from the crash to
	// agreement.
	Events int64
	// Stats covers the whole run, startup included.
	Stats Stats
	// Violation is nil when every invariant held.
	Violation *Violation
	// TraceHash fingerprints the whole event trace: same seed, same hash.
	TraceHash uint64
}

// view is who a node says leads, and in which epoch: itself when it reports
// Role==Leader.
type view struct {
	leader protocols.ID
	epoch  uint64
}

// failover is the state RunFailover keeps beside the run.
type failover struct {
	r    *run
	f    Failover
	sent *[256]int64 // by kind, counted while counting is on
	on   *bool

	views   []view
	counts  map[view]int // live nodes per view
	live    int
	common  view // the view every live node holds, led by a live leader
	agreed  bool
	leaders []int // nodes whose last Status said Role==Leader
	gone    []int // crashed nodes, ascending
	// lastTick is the node the last event ticked, or -1.
	lastTick int
}

// counting wraps a protocol to count the messages of every Ready it hands
// the driver, which sends all of them.
type counting struct {
	protocols.Protocol
	sent *[256]int64
	on   *bool
}

// Ready counts the batch's messages by kind before handing it on.
func (c counting) Ready() protocols.Ready {
	rd := c.Protocol.Ready()
	if *c.on {
		for _, m := range rd.Messages {
			c.sent[m.Kind]++
		}
	}
	return rd
}

// RunFailover measures one failover: it starts f.Nodes nodes built by
// o.Factory, waits until all of them have followed one leader for f.Settle,
// crashes that leader, and runs until every survivor follows one new live
// leader, checking o.Checks all along. o.Nodes, the fault options and
// Checks.LivenessBound are not used (f.Limit bounds each phase instead).
// The failure detector is the simulator's fixed-delay model, no phi: a
// survivor's first tick after the crash notes the leader unreachable, and
// its tick o.SuspectAfter later feeds Suspect(leader) — o.SuspectAfter plus
// up to one tick interval after the crash; MemberDown follows after
// o.DownAfter. It returns ErrNoStableLeader or ErrEventLimit when there was no
// leader to crash; running out of time or events after the crash is a
// result (Agreed false), not an error.
func RunFailover(o Options, seed uint64, f Failover) (FailoverResult, error) {
	res := FailoverResult{Seed: seed, Suspected: -1}
	o.Nodes = 0
	o, err := o.withDefaults()
	if err != nil {
		return res, err
	}
	if f.Nodes < 2 {
		return res, fmt.Errorf("sim: failover needs at least 2 nodes, not %d", f.Nodes)
	}
	if f.MinDelay <= 0 && f.MaxDelay <= 0 {
		f.MinDelay, f.MaxDelay = time.Millisecond, 2*time.Millisecond
	}
	if f.MaxDelay < f.MinDelay {
		return res, fmt.Errorf("sim: failover delays [%v, %v] are reversed", f.MinDelay, f.MaxDelay)
	}
	if f.Settle <= 0 {
		f.Settle = o.ElectionTimeout
	}
	if f.Limit <= 0 {
		f.Limit = time.Minute
	}
	fo := &failover{f: f, sent: new([256]int64), on: new(bool), counts: make(map[view]int)}
	inner := o.Factory
	o.Factory = func(c NodeConfig) (protocols.Protocol, error) {
		p, err := inner(c)
		if err != nil {
			return nil, err
		}
		return counting{Protocol: p, sent: fo.sent, on: fo.on}, nil
	}

	rng := newRand(seed)
	s := Schedule{Nodes: f.Nodes, MinDelay: f.MinDelay, MaxDelay: f.MaxDelay, ClockRates: make([]float64, f.Nodes)}
	for i := range s.ClockRates {
		s.ClockRates[i] = 1 + o.MaxClockDrift*(2*rng.Float64()-1)
	}
	r, err := newRun(o, seed, rng, s)
	if err != nil {
		return res, err
	}
	fo.r = r
	fo.views = make([]view, f.Nodes)
	fo.live = f.Nodes
	fo.counts[view{}] = f.Nodes
	fo.lastTick = -1
	err = fo.measure(&res)
	res.Stats = r.stats
	res.Stats.VirtualTime = r.now
	res.Violation = r.viol
	if r.viol != nil {
		res.Stats.Violations = 1
	}
	res.TraceHash = r.trace.hash
	return res, err
}

// measure runs both phases of RunFailover into res.
func (fo *failover) measure(res *FailoverResult) error {
	r, f := fo.r, fo.f
	if fo.checkAll(); r.done {
		return nil
	}

	// Phase 1: one leader that every node has followed for Settle, and
	// still does a random part of a heartbeat interval later.
	end, events := r.now+f.Limit, r.stats.Events
	for {
		since, held := time.Duration(-1), view{}
		stable := func() bool {
			switch {
			case !fo.agreed:
				since = -1
			case since < 0 || held != fo.common:
				since, held = r.now, fo.common
			}
			return since >= 0 && r.now-since >= f.Settle
		}
		left := int64(0)
		if f.MaxEvents > 0 {
			if left = f.MaxEvents - (r.stats.Events - events); left <= 0 {
				left = -1
			}
		}
		if left < 0 || !fo.run(end-r.now, left, stable) {
			switch {
			case r.done:
				return nil
			case f.MaxEvents > 0 && r.stats.Events-events >= f.MaxEvents:
				return fmt.Errorf("%w (%d nodes, %d events, %d messages, %v virtual)",
					ErrEventLimit, f.Nodes, f.MaxEvents, r.stats.Messages, r.now.Round(time.Millisecond))
			}
			return fmt.Errorf("%w (%d nodes, %v)", ErrNoStableLeader, f.Nodes, f.Limit)
		}
		jitter := randDur(r.rng, r.o.HeartbeatInterval)
		if fo.run(jitter, 0, func() bool { return false }); r.done {
			return nil
		}
		if fo.agreed && fo.common == held {
			break
		}
	}
	res.Leader, res.Epoch = fo.common.leader, fo.common.epoch

	// Phase 2: crash it and wait for the survivors to agree on a new one.
	lead := int(res.Leader) - 1
	fo.crash(lead)
	res.CrashAt = r.now
	events = r.stats.Events
	*fo.on = true
	if f.OnCrash != nil {
		f.OnCrash()
	}
	res.Agreed = fo.runStalls(f.Limit, f.MaxEvents, func() bool {
		if res.Suspected < 0 && fo.lastTick >= 0 {
			if n := r.nodes[fo.lastTick]; !n.crashed && n.suspected[lead] {
				res.Suspected = r.now - res.CrashAt
			}
		}
		return fo.agreed && fo.common.leader != res.Leader
	})
	if res.Agreed && f.OnAgreed != nil {
		f.OnAgreed()
	}
	*fo.on = false
	res.Elapsed = r.now - res.CrashAt
	res.Events = r.stats.Events - events
	if res.Agreed {
		res.NewLeader, res.NewEpoch = fo.common.leader, fo.common.epoch
	}
	res.Sent = make(map[protocols.MessageKind]int64)
	for k, c := range fo.sent {
		if c > 0 {
			res.Sent[protocols.MessageKind(k)] = c
		}
	}
	return nil
}

// run processes events for at most d of virtual time and, when max is
// positive, at most max events, until done reports true after an event. It
// reports whether done did. It is runSchedule's loop for a schedule without
// faults, with the incremental checker unless Failover.FullCheck.
func (fo *failover) run(d time.Duration, maxEvents int64, done func() bool) bool {
	r := fo.r
	end := r.now + d
	for n := int64(0); r.q.len() > 0 && !r.done && r.q.ev[0].at <= end; n++ {
		if maxEvents > 0 && n >= maxEvents {
			return false
		}
		ev := r.q.pop()
		r.now = ev.at
		r.stats.Events++
		fo.lastTick = -1
		nd := r.nodes[ev.node]
		switch ev.kind {
		case evDeliver:
			r.deliver(ev)
		case evTick:
			if nd.crashed || nd.paused || ev.inc != nd.tickGen {
				continue
			}
			fo.tick(nd)
			fo.lastTick = nd.idx
		default:
			continue // RunFailover schedules no faults
		}
		if r.done {
			return false
		}
		fo.check(nd)
		if r.done {
			return false
		}
		if done() {
			return true
		}
	}
	if !r.done {
		r.now = max(r.now, end)
	}
	return false
}

// runStalls is run with Failover's stalls: it runs for at most d of
// virtual time and maxEvents events (when positive), pausing and resuming
// survivors on Failover's stall schedule, until done reports true.
func (fo *failover) runStalls(d time.Duration, maxEvents int64, done func() bool) bool {
	r, f := fo.r, fo.f
	if f.Stall <= 0 {
		return fo.run(d, maxEvents, done)
	}
	end, start := r.now+d, r.stats.Events
	// left is what remains of maxEvents: 0 for no limit, -1 when spent.
	left := func() int64 {
		if maxEvents <= 0 {
			return 0
		}
		if l := maxEvents - (r.stats.Events - start); l > 0 {
			return l
		}
		return -1
	}
	next := r.now + f.StallAfter
	for {
		if l := left(); l < 0 || fo.run(min(next, end)-r.now, l, done) {
			return l >= 0
		}
		if r.done || r.now >= end || left() < 0 {
			return false
		}
		stalled := fo.pause()
		if l := left(); l < 0 || fo.run(min(r.now+f.Stall, end)-r.now, l, done) {
			fo.resume(stalled)
			return l >= 0
		}
		if fo.resume(stalled); r.done {
			return false
		}
		if done() {
			return true
		}
		if f.StallEvery <= 0 {
			if l := left(); l >= 0 {
				return fo.run(end-r.now, l, done)
			}
			return false
		}
		next += f.StallEvery
		if next < r.now {
			next = r.now
		}
	}
}

// pause freezes Failover.StallNodes survivors (all when zero), chosen
// from the run's seed, and returns them.
func (fo *failover) pause() []int {
	r := fo.r
	var live []int
	for _, i := range r.rng.Perm(len(r.nodes)) {
		if n := r.nodes[i]; !n.crashed && !n.paused {
			live = append(live, i)
		}
	}
	if k := fo.f.StallNodes; k > 0 && k < len(live) {
		live = live[:k]
	}
	slices.Sort(live)
	for _, i := range live {
		n := r.nodes[i]
		n.paused = true
		n.fault++
		r.stats.Faults[FaultPause]++
		r.rec(traceRec{kind: recFault, node: int32(i), a: uint64(FaultPause), b: uint64(i)})
	}
	return live
}

// resume wakes the nodes pause froze, in order, at one instant, as
// run.resume does but through fo.tick, so that a peer still frozen at
// this instant is not fed to its failure detector as unheard.
func (fo *failover) resume(stalled []int) {
	r := fo.r
	for _, i := range stalled {
		n := r.nodes[i]
		if n.crashed || !n.paused || r.done {
			continue
		}
		r.rec(traceRec{kind: recUndo, node: int32(i), a: uint64(FaultPause), b: uint64(i)})
		if !r.resumeWith(n, fo.tick) || r.done {
			return
		}
		fo.check(n)
	}
}

// tick is run.tick, with the failure detector fed only the crashed peers
// unless FullCheck: every other peer is up and connected throughout, so
// visiting it would change nothing.
func (fo *failover) tick(n *node) {
	r := fo.r
	if fo.f.FullCheck {
		r.tick(n)
		return
	}
	if r.o.SuspectAfter >= 0 || r.o.DownAfter >= 0 {
		for _, i := range fo.gone {
			if i != n.idx {
				fo.r.detectPeer(n, i)
				r.drain(n)
			}
		}
	}
	if n.p == nil || r.done {
		return
	}
	now := r.local(n)
	r.rec(traceRec{kind: recTick, node: int32(n.idx), local: now})
	n.p.Tick(now)
	r.drain(n)
	if r.done {
		return
	}
	r.writer = n.idx
	d := time.Duration(float64(r.o.TickInterval) / n.rate)
	r.q.push(event{at: r.now + max(d, 1), kind: evTick, node: int32(n.idx), inc: n.tickGen})
}

// crash crashes node i for good.
func (fo *failover) crash(i int) {
	r := fo.r
	n := r.nodes[i]
	fo.forget(i)
	r.crash(n)
	n.fault++
	r.stats.Faults[FaultCrash]++
	r.rec(traceRec{kind: recFault, node: int32(i), a: uint64(FaultCrash), b: uint64(i)})
	fo.gone = append(fo.gone, i)
	slices.Sort(fo.gone)
	if fo.f.FullCheck {
		r.check()
	}
	fo.agree(i)
}

// checkAll checks every node, as runSchedule does before its first event.
func (fo *failover) checkAll() {
	if fo.f.FullCheck {
		fo.r.check()
	}
	for _, n := range fo.r.nodes {
		fo.checkOne(n, !fo.f.FullCheck)
		if fo.r.done {
			return
		}
	}
}

// check runs the checker after an event that touched n: the full pass over
// every node with FullCheck, else n alone.
func (fo *failover) check(n *node) {
	r := fo.r
	if fo.f.FullCheck {
		r.check()
		for _, m := range r.nodes {
			fo.checkOne(m, false)
		}
		return
	}
	fo.checkOne(n, true)
	if w := r.writer; w >= 0 && !r.done {
		r.writer = -1
		if m := r.nodes[w]; !m.crashed && m.st.Role == protocols.Leader {
			r.write(m, m.st.Epoch)
		}
	}
}

// checkOne asks n for its Status and, when enforce, verifies n's part of
// what run.check verifies over every node; it always updates the views.
func (fo *failover) checkOne(n *node, enforce bool) {
	r := fo.r
	if n.crashed {
		return
	}
	if enforce {
		st := n.p.Status(r.local(n))
		n.st = st
		if !fo.lease(n) {
			return
		}
		if st.Epoch < n.maxEpoch {
			if r.o.Checks.EpochMonotonic {
				r.violate(InvEpochMonotonic, "n%d's epoch went back from %d to %d", n.idx+1, n.maxEpoch, st.Epoch)
				return
			}
		} else {
			n.maxEpoch = st.Epoch
		}
		key := statusKey{st.Role, st.Leader, st.Epoch}
		if !n.lastValid || key != n.lastKey {
			n.lastKey, n.lastValid = key, true
			if r.claims(n, st); r.done {
				return
			}
		}
	}
	fo.setView(n)
}

// lease keeps the set of nodes reporting Role==Leader and, with
// Checks.Lease, fails the run when two of them still do at this instant.
// It reports whether the run goes on.
func (fo *failover) lease(n *node) bool {
	r := fo.r
	i := slices.Index(fo.leaders, n.idx)
	switch {
	case n.st.Role != protocols.Leader:
		if i >= 0 {
			fo.leaders = slices.Delete(fo.leaders, i, i+1)
		}
		return true
	case i < 0:
		fo.leaders = append(fo.leaders, n.idx)
	}
	if len(fo.leaders) < 2 || !r.o.Checks.Lease {
		return true
	}
	for _, j := range fo.leaders {
		if m := r.nodes[j]; j != n.idx && !m.crashed {
			if st := m.p.Status(r.local(m)); st.Role == protocols.Leader {
				m.st = st
				a, b := min(j, n.idx), max(j, n.idx)
				r.violate(InvLease, "n%d and n%d both report a valid lease (epochs %d and %d)", a+1, b+1, r.nodes[a].st.Epoch, r.nodes[b].st.Epoch)
				return false
			}
		}
	}
	return true
}

// setView records the view of n's last Status and updates agreement.
func (fo *failover) setView(n *node) {
	v := view{n.st.Leader, n.st.Epoch}
	if n.st.Role == protocols.Leader {
		v.leader = n.member.ID
	}
	if old := fo.views[n.idx]; old != v {
		fo.counts[old]--
		if fo.counts[old] == 0 {
			delete(fo.counts, old)
		}
		fo.counts[v]++
		fo.views[n.idx] = v
	}
	fo.agree(n.idx)
}

// forget drops crashed node i from the views.
func (fo *failover) forget(i int) {
	old := fo.views[i]
	fo.counts[old]--
	if fo.counts[old] == 0 {
		delete(fo.counts, old)
	}
	fo.views[i] = view{}
	fo.live--
	if j := slices.Index(fo.leaders, i); j >= 0 {
		fo.leaders = slices.Delete(fo.leaders, j, j+1)
	}
}

// agree updates whether every live node holds one view naming a live
// leader, after node i's view changed (or i crashed).
func (fo *failover) agree(i int) {
	ok := func(v view) bool {
		if v.leader == protocols.None || fo.counts[v] != fo.live {
			return false
		}
		l := fo.r.nodes[v.leader-1]
		return !l.crashed && fo.views[l.idx] == v
	}
	if fo.r.nodes[i].crashed {
		// The crash may have removed the last dissenter: try anyone's view.
		for _, n := range fo.r.nodes {
			if !n.crashed {
				i = n.idx
				break
			}
		}
	}
	switch {
	case fo.agreed && ok(fo.common):
	case !fo.r.nodes[i].crashed && ok(fo.views[i]):
		fo.agreed, fo.common = true, fo.views[i]
	default:
		fo.agreed = false
	}
}
