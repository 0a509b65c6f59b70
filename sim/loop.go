package sim

import (
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

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
			// Another fault: the network is no longer intact. After the
			// heal faults and undos do nothing (the isolation probe).
			r.iso.on = r.iso.on && r.healed
			r.fault(int(ev.arg))
			r.calmSince = r.now
		case evUndo:
			r.iso.on = r.iso.on && r.healed
			r.undo(int(ev.arg), int(ev.node), ev.inc)
			r.calmSince = r.now
		case evHeal:
			r.iso.on = false
			r.heal()
			r.calmSince = r.now
		case evDeadline:
			if !r.live {
				r.violate(InvLiveness, "no leader followed by every node %v after the heal", r.o.Checks.LivenessBound)
			} else if name := r.notLive(); name != "" {
				r.violate(InvLiveness, "election %s: no leader followed by every node %v after the heal", name, r.o.Checks.LivenessBound)
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
			r.healthSoft(n, ss, 0)
		}
		n.p.Advance(rd)
	}
	r.healthFire()
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
	for c := range copies {
		var d time.Duration
		if f, ok := r.frameDelay(n, to); ok && c == 0 {
			d = f
		} else {
			d = r.minDelay + randDur(r.rng, r.maxDelay-r.minDelay+1)
			if c == 0 {
				r.noteFrame(n, to, d)
			}
		}
		if r.longProb > 0 && r.rng.Float64() < r.longProb {
			r.stats.Faults[FaultLongDelay]++
			d += r.o.ElectionTimeout + randDur(r.rng, 2*r.o.ElectionTimeout)
		}
		if d > max(r.sched.MaxDelay, r.minDelay) {
			r.lateUntil = max(r.lateUntil, r.now+d)
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
	p := n.p
	if n.cn != nil && len(n.cn.els) > 0 {
		// Routed by the election the message names (elections.go).
		c := r.stepTarget(n, m)
		if c == nil {
			r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropElection, msg: m})
			return
		}
		p = coreProto{c: c}
	}
	if err := p.Step(now, m); err != nil {
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

// A node running several elections sends what one event produced for one
// peer in one frame, as the agent's one SendAll per loop iteration does:
// those messages share a delay (a duplicate or a long delay still strikes
// one message alone). frameDelay is that frame's delay for messages from
// n to to, if n already sent one to it in this event; noteFrame records
// it. Nodes running one election draw a delay per message, as always.
func (r *run) frameDelay(n *node, to int) (time.Duration, bool) {
	if n.cn == nil || len(n.cn.els) == 0 || n.frames == nil {
		return 0, false
	}
	f := n.frames[to]
	return f.d, f.event == r.stats.Events
}

func (r *run) noteFrame(n *node, to int, d time.Duration) {
	if n.cn == nil || len(n.cn.els) == 0 {
		return
	}
	if n.frames == nil {
		n.frames = make([]frame, len(r.nodes))
	}
	n.frames[to] = frame{event: r.stats.Events, d: d}
}

// frame is the delay of the frame a node last sent one peer, and the
// event (Stats.Events) it was sent in.
type frame struct {
	event int64
	d     time.Duration
}
