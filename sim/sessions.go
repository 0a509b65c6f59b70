package sim

import (
	"slices"
	"time"
)

// The session nemesis (FaultSession) over named elections whose
// candidacy sessions hold (docs/simulator.md, "Several elections per
// node"); the session-leader check is elShell.Publish's.

// Session nemesis operations (FaultSession), by the action's draw.
const (
	sessionOpenClose  = iota // open a session, check in for the action's duration, close it
	sessionOpenSilent        // open a session, check in for the action's duration, then stop
	sessionCloseAll          // close every session the node's processes hold
	sessionSilenceAll        // every holder on the node stops checking in
)

var sessionOps = [...]string{"open-then-close", "open-then-silent", "close-all", "silence-all"}

// forever is a holder that checks in until the run ends.
const forever = time.Duration(1<<63 - 1)

// sessionFault is FaultSession: on a random session election, a local
// process of the target node (the election's leader for TargetLeader)
// opens a session, or the node's holders close theirs or stop checking
// in.
func (r *run) sessionFault(a Action) {
	var els []int
	for i, er := range r.el {
		if er.session.Required {
			els = append(els, i)
		}
	}
	if len(els) == 0 {
		return
	}
	i := els[r.rng.IntN(len(els))]
	er := r.el[i]
	tgt := r.rng.IntN(len(r.nodes))
	if a.Target == TargetLeader && er.curLead >= 0 {
		tgt = er.curLead
	}
	op := r.rng.IntN(len(sessionOps))
	n := r.nodes[tgt]
	if n.crashed || n.paused || n.cn.leave != nil {
		return // no process reaches a stopped agent's socket
	}
	e := n.cn.els[i]
	now := r.local(n)
	r.stats.Faults[FaultSession]++
	r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(FaultSession), b: uint64(tgt), c: uint64(op), el: er.spec.Name})
	switch op {
	case sessionOpenClose, sessionOpenSilent:
		id, err := e.c.OpenSession(now)
		if err != nil {
			r.rec(traceRec{kind: recStepErr, node: int32(tgt), err: err, el: er.spec.Name})
			break
		}
		e.held = append(e.held, heldSession{id: id, until: r.now + a.Duration, close: op == sessionOpenClose})
		r.armKeep(n, i)
	case sessionCloseAll:
		for _, h := range e.held {
			e.c.CloseSession(now, h.id)
		}
		e.held = nil
	case sessionSilenceAll:
		for j := range e.held {
			e.held[j].silent = true
		}
	}
	r.drainCore(n)
}

// keepEvery is how often holders check in on election i: three times a
// TTL, or once an election timeout without one (to end their holds).
func (r *run) keepEvery(i int) time.Duration {
	if ttl := r.el[i].session.TTL; ttl > 0 {
		return ttl / 3
	}
	return r.o.ElectionTimeout
}

// armKeep queues n's next check-in round on election i unless one is.
func (r *run) armKeep(n *node, i int) {
	e := n.cn.els[i]
	if e.keeping {
		return
	}
	e.keeping = true
	r.q.push(event{at: r.now + r.keepEvery(i), kind: evSessionKeep, node: int32(n.idx), inc: e.keepGen, arg: int32(i)})
}

// sessionKeep is a check-in round of n's holders on election ev.arg: each
// checks in until its hold ends, then closes its session or falls
// silent. A paused agent answers none: its holders' check-ins are missed.
func (r *run) sessionKeep(ev event) {
	n := r.nodes[ev.node]
	i := int(ev.arg)
	e := n.cn.els[i]
	if n.crashed || ev.inc != e.keepGen || e.c == nil {
		return
	}
	e.keeping = false
	if n.paused {
		r.armKeep(n, i)
		return
	}
	now := r.local(n)
	kept := e.held[:0]
	active := false
	for _, h := range e.held {
		switch {
		case h.silent:
		case r.now < h.until:
			if err := e.c.KeepSession(now, h.id); err != nil {
				continue // the core ended it; Settle says so too
			}
			active = true
		case h.close:
			e.c.CloseSession(now, h.id)
			continue
		default:
			h.silent = true
		}
		kept = append(kept, h)
	}
	e.held = kept
	if active {
		r.armKeep(n, i)
	}
	r.drainCore(n)
}

// sessionsHeal ends the session nemesis: every session is closed, and
// one node that can lead each session election (running, not leaving, a
// voter) gets the only session, held for good, which liveness requires
// to lead. With none, no leader is owed.
func (r *run) sessionsHeal() {
	for i, er := range r.el {
		if !er.session.Required {
			continue
		}
		var cands []int
		for _, n := range r.nodes {
			e := n.cn.els[i]
			if n.crashed || e.c == nil {
				continue
			}
			now := r.local(n)
			for _, h := range e.held {
				e.c.CloseSession(now, h.id)
			}
			e.held = nil
			r.drainCore(n)
			if r.done {
				return
			}
			if n.cn.leave == nil && (len(er.voters) == 0 || slices.Contains(er.voters, n.member.Name)) {
				cands = append(cands, n.idx)
			}
		}
		er.holder = -1
		if len(cands) == 0 {
			er.live = true
			continue
		}
		h := r.nodes[cands[r.rng.IntN(len(cands))]]
		e := h.cn.els[i]
		id, err := e.c.OpenSession(r.local(h))
		if err != nil {
			r.rec(traceRec{kind: recStepErr, node: int32(h.idx), err: err, el: er.spec.Name})
			er.live = true
			continue
		}
		er.holder = h.idx
		e.held = []heldSession{{id: id, until: forever, close: true}}
		r.armKeep(h, i)
		r.drainCore(h)
		if r.done {
			return
		}
	}
}
