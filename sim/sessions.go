package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The checker of named elections, the session nemesis and the isolation
// watch (docs/simulator.md, "Several elections per node").

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

// checkElections checks every named election as checkDefault checks the
// default one: lease, epochs, claims, the fenced write of writer's
// leader, and liveness after the heal (the session holder must lead).
func (r *run) checkElections(writer int) {
	for i, er := range r.el {
		c := &er.spec.Checks
		leaders, first := 0, -1
		for _, n := range r.nodes {
			e := n.cn.els[i]
			if n.crashed || e.c == nil {
				continue
			}
			st, _ := e.c.Leader(r.local(n))
			e.st = st
			if st.Role == protocols.Leader {
				leaders++
				if leaders == 1 {
					first = n.idx
				} else if c.Lease {
					r.violate(InvLease, "election %s: n%d and n%d both report a valid lease (epochs %d and %d)", er.spec.Name, first+1, n.idx+1, r.nodes[first].cn.els[i].st.Epoch, st.Epoch)
					return
				}
			}
			if st.Epoch < e.maxEpoch {
				if c.EpochMonotonic {
					r.violate(InvEpochMonotonic, "election %s: n%d's epoch went back from %d to %d", er.spec.Name, n.idx+1, e.maxEpoch, st.Epoch)
					return
				}
			} else {
				e.maxEpoch = st.Epoch
			}
			key := statusKey{st.Role, st.Leader, st.Epoch}
			if !e.lastValid || key != e.lastKey {
				e.lastKey, e.lastValid = key, true
				r.claimsIn(er.leaderOf, c, er.spec.Name, n, st, func(epoch uint64) {
					r.stats.Elections++
					r.rec(traceRec{kind: recLeader, node: int32(n.idx), a: epoch, el: er.spec.Name})
				})
				if r.done {
					return
				}
			}
		}
		er.curLead = first
		if writer >= 0 {
			if n := r.nodes[writer]; !n.crashed && n.cn.els[i].st.Role == protocols.Leader {
				if r.writeTo(&er.fence, c, er.spec.Name, n, n.cn.els[i].st.Epoch); r.done {
					return
				}
			}
		}
		if r.healed && !er.live && c.LivenessBound > 0 && leaders == 1 && (er.holder < 0 || !c.SessionLeader || er.holder == first) {
			r.electionLive(i, first)
		}
	}
}

// electionLive marks named election i live once every running node
// follows leader first in its epoch, and ends the run when every
// election is.
func (r *run) electionLive(i, first int) {
	er := r.el[i]
	l := r.nodes[first].cn.els[i].st
	id := r.nodes[first].member.ID
	for _, n := range r.nodes {
		if n.crashed || n.paused || n.cn.els[i].st.Leader != id || n.cn.els[i].st.Epoch != l.Epoch {
			return
		}
	}
	er.live = true
	r.rec(traceRec{kind: recLive, node: int32(first), a: l.Epoch, el: er.spec.Name})
	if r.live && r.electionsLive() {
		r.endOrProbe()
	}
}

// electionsLive reports whether every named election whose liveness is
// checked is live.
func (r *run) electionsLive() bool { return r.notLive() == "" }

// notLive names a named election owed liveness and not live yet, or "".
func (r *run) notLive() string {
	for _, er := range r.el {
		if !er.live && er.spec.Checks.LivenessBound > 0 {
			return er.spec.Name
		}
	}
	return ""
}

// describeElections adds n's named elections' states to a violation.
func (r *run) describeElections(n *node) []string {
	var out []string
	for i, e := range n.cn.els {
		s := fmt.Sprintf("   %s: persisted{term=%d vote=%d epoch=%d} max-epoch=%d", r.el[i].spec.Name, e.hs.Term, e.hs.Vote, e.hs.Epoch, e.maxEpoch)
		if !n.crashed && e.c != nil {
			st, _ := e.c.Leader(r.local(n))
			s += fmt.Sprintf(" status{role=%s leader=%d epoch=%d term=%d} sessions=%d", st.Role, st.Leader, st.Epoch, st.Term, e.c.Sessions())
		}
		out = append(out, s)
	}
	return out
}

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

// isoWatch is the isolation check's window (Checks.Isolation): while
// node x alone is down, each watched election keeps its leader and epoch.
type isoWatch struct {
	on bool
	x  int
	// lead[e+1] is the leader election e (-1: the default one) had when
	// x went down, -1 when the election is not watched; epoch[e+1] its
	// epoch.
	lead  []int
	epoch []uint64
	what  string
}

// statusOf is node n's status in election e (-1: the default one) at its
// local time now.
func (r *run) statusOf(n *node, e int) protocols.Status {
	if e < 0 {
		return n.p.Status(r.local(n))
	}
	st, _ := n.cn.els[e].c.Leader(r.local(n))
	return st
}

// isoStart opens the isolation window as node x goes down (what: crash,
// pause), before the fault takes effect. The window opens only while
// the rest of the network is intact: every other node running and not
// leaving, every link up, no message loss, duplication, long or slowed
// delays, no node ineligible, no probe. It watches each election with
// Checks.Isolation that x does not lead, whose every node follows one
// leader in one epoch, and whose leader keeps a majority of its voters
// without x. Any later fault, undo or the heal closes it (loop).
func (r *run) isoStart(x int, what string) {
	r.iso.on = false
	if r.cm == nil || r.cm.probe != probeNone || r.dropProb > 0 || r.dupProb > 0 || r.longProb > 0 ||
		r.maxDelay != max(r.sched.MaxDelay, r.minDelay) || slices.Contains(r.hl.ineligible, true) {
		return
	}
	if !r.o.Checks.Isolation && !slices.ContainsFunc(r.el, func(er *elRun) bool { return er.spec.Checks.Isolation }) {
		return
	}
	for i := range r.conn {
		if slices.Contains(r.conn[i], false) {
			return
		}
	}
	for _, n := range r.nodes {
		if n.crashed || n.paused || n.cn.leave != nil || n.cn.c == nil {
			return
		}
	}
	w := isoWatch{x: x, what: what, lead: make([]int, len(r.el)+1), epoch: make([]uint64, len(r.el)+1)}
	for e := -1; e < len(r.el); e++ {
		w.lead[e+1] = -1
		on := r.o.Checks.Isolation
		if e >= 0 {
			on = r.el[e].spec.Checks.Isolation
		}
		if !on {
			continue
		}
		l := -1
		var lst protocols.Status
		for _, n := range r.nodes {
			if st := r.statusOf(n, e); st.Role == protocols.Leader {
				if l >= 0 {
					l = -2
					break
				}
				l, lst = n.idx, st
			}
		}
		if l < 0 || l == x {
			continue
		}
		stable := true
		for _, n := range r.nodes {
			if st := r.statusOf(n, e); st.Leader != r.nodes[l].member.ID || st.Epoch != lst.Epoch {
				stable = false
				break
			}
		}
		if c := lst.Config; !stable || (!c.IsZero() && c.Has(r.mems[x].Name) && c.Len()-1 < c.Len()/2+1) {
			continue
		}
		w.lead[e+1], w.epoch[e+1] = l, lst.Epoch
		w.on = true
		r.stats.IsolationWatches++
	}
	if w.on {
		r.stats.IsolationWindows++
	}
	r.iso = w
}

// evIsoEnd ends the isolation probe, and the run.
const evIsoEnd = evFailover + 2

// endOrProbe ends a run whose every election is live after the heal,
// unless an isolation check is on: then the isolation probe runs first.
func (r *run) endOrProbe() {
	if !r.o.Checks.Isolation && !slices.ContainsFunc(r.el, func(er *elRun) bool { return er.spec.Checks.Isolation }) {
		r.done = true
		return
	}
	if at := r.healAt + isoQuiet*r.o.ElectionTimeout; r.now < at {
		// Messages of the fault phase may still be in flight: a long
		// delay (three election timeouts at most) on a slowed network
		// (three more). The probe starts once they all landed.
		r.q.push(event{at: at, kind: evIsoStart})
		return
	}
	if !r.isoProbe() {
		r.done = true
	}
}

// isoQuiet is how long after the heal, in election timeouts, the
// isolation probe starts at the earliest.
const isoQuiet = 7

// evIsoStart starts a deferred isolation probe.
const evIsoStart = evFailover + 3

// isoProbe is the isolation probe, once every election is live after the
// heal: one node (half the time the leader of a random election, so that
// its crash moves that election) crashes or pauses for good, and the
// watched elections it does not lead must keep their leaders and epochs
// for between one election timeout and the membership model's latest
// death declaration, after which the run ends. It reports whether the
// probe started.
func (r *run) isoProbe() bool {
	if r.isoProbed {
		return false
	}
	r.isoProbed = true
	x := r.rng.IntN(len(r.nodes))
	if r.rng.IntN(2) == 0 {
		e := r.rng.IntN(len(r.el)+1) - 1
		lead := r.curLead
		if e >= 0 {
			lead = r.el[e].curLead
		}
		if lead >= 0 {
			x = lead
		}
	}
	kind := FaultCrash
	if r.rng.IntN(2) == 0 {
		kind = FaultPause
	}
	if r.isoStart(x, kind.String()); !r.iso.on {
		return false
	}
	nd := r.nodes[x]
	r.rec(traceRec{kind: recFault, node: int32(x), a: uint64(kind), b: uint64(x)})
	if kind == FaultCrash {
		r.crash(nd)
	} else {
		nd.paused = true
		nd.fault++
	}
	d := r.o.ElectionTimeout + randDur(r.rng, deathMin+deathSpread)
	r.q.push(event{at: r.now + d, kind: evIsoEnd})
	return true
}

// checkIsolation fails a watched election whose leader stopped leading
// its epoch inside the window.
func (r *run) checkIsolation() {
	w := &r.iso
	for k, l := range w.lead {
		if l < 0 {
			continue
		}
		e := k - 1
		n := r.nodes[l]
		var st protocols.Status
		switch {
		case e < 0:
			st = n.st
		default:
			st = n.cn.els[e].st
		}
		if n.crashed || st.Role != protocols.Leader || st.Epoch != w.epoch[k] {
			name := "default"
			if e >= 0 {
				name = r.el[e].spec.Name
			}
			r.violate(InvIsolation, "election %s: n%d led epoch %d when n%d alone went down (%s) with the rest of the network intact, and now reports role=%s epoch=%d",
				name, l+1, w.epoch[k], w.x+1, w.what, st.Role, st.Epoch)
			return
		}
	}
}
