package sim

import "github.com/conclave-agent/conclave/protocols"

func (r *run) crash(n *node) {
	n.p = nil
	if n.cn != nil {
		n.cn.c = nil
		stopElections(n)
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
		r.isoStart(tgt, "pause")
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
	case FaultRestartNewPeer, FaultLeave, FaultWipedRestart, FaultSeedSplit:
		r.coreFault(a, i, r.target(a.Target))
		return
	case FaultPauseGroup:
		r.pauseGroup(a, i)
		return
	case FaultSession:
		r.sessionFault(a)
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
	r.isoStart(tgt, "crash")
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
	case FaultRestartNewPeer, FaultLeave, FaultWipedRestart, FaultSeedSplit:
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
	if r.sessionsHeal(); r.done {
		return
	}
	if b := r.o.Checks.LivenessBound; b > 0 {
		r.q.push(event{at: r.now + b, kind: evDeadline})
	} else {
		r.q.push(event{at: r.now + 20*r.o.ElectionTimeout, kind: evStop})
	}
}
