package sim

import (
	"fmt"

	"github.com/conclave-agent/conclave/protocols"
)

// The checker of named elections (Options.Elections): each election is
// judged on its own, as checkDefault judges the default one.

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
	if er.spec.Group && first != r.curLead {
		return // the group is not together yet
	}
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
		if er.live && er.spec.Group && er.curLead != r.curLead {
			// Live before the anchor's leader moved: the group must be
			// together again before the run may end.
			er.live = false
		}
		if !er.live && er.spec.Checks.LivenessBound > 0 {
			if er.spec.Group {
				return er.spec.Name + " (to be led by the default election's leader, its group's anchor)"
			}
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
