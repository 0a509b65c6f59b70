package sim

import (
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

// The isolation check (Checks.Isolation; docs/simulator.md, "Several
// elections per node"): a crash or pause of one node must not move the
// leadership of an election that node does not lead while the rest of
// the network is intact.

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
// delays, no node ineligible, no probe. Intact must also have lasted: no
// message sent slowed or long-delayed still in flight (one landing late
// can depose a leader without x's help), and an election timeout since
// the last fault, undo or heal, so that a leader's lease rests on
// heartbeats sent to an intact network (a lease is shorter than an
// election timeout). It watches each election with
// Checks.Isolation that x does not lead, whose every node follows one
// leader in one epoch, and whose leader keeps a majority of its voters
// without x. Any later fault, undo or the heal closes it (loop).
func (r *run) isoStart(x int, what string) {
	r.iso.on = false
	if r.cm == nil || r.cm.probe != probeNone || r.dropProb > 0 || r.dupProb > 0 || r.longProb > 0 ||
		r.maxDelay != max(r.sched.MaxDelay, r.minDelay) || slices.Contains(r.hl.ineligible, true) ||
		r.now < r.lateUntil || r.now < r.calmSince+r.o.ElectionTimeout {
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
