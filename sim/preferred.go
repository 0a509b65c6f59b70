package sim

// The preferred-leader check (Checks.Preferred): bully and ring rank their
// members by (priority, id), and a member of higher rank that is up and
// eligible takes leadership from a lower one once it has been so for its
// preempt delay. After the heal and the liveness the checker already
// demands, the run goes on fault-free for Checks.Settle, and then the
// live, eligible node of highest rank must lead, followed by every live
// node. It is liveness-style: it holds at the end of the quiet, not at
// every instant (a preferred node still inside its delay rightly follows
// a lower leader).

// InvPreferred: after the quiet, the cluster does not follow the live,
// eligible node of highest rank.
const InvPreferred = "preferred-leads"

// outranks reports whether node i ranks above node j: a higher priority,
// or the same and a higher id.
func (r *run) outranks(i, j int) bool {
	pi, pj := r.mems[i].Priority, r.mems[j].Priority
	if pi != pj {
		return pi > pj
	}
	return r.mems[i].ID > r.mems[j].ID
}

// checkPreferred runs at the end of the quiet (Checks.Preferred).
func (r *run) checkPreferred() {
	best := -1
	for i, n := range r.nodes {
		if n.crashed || n.paused || r.candidacy(i).Ineligible {
			continue
		}
		if best < 0 || r.outranks(i, best) {
			best = i
		}
	}
	// A node an operator asked to resign spares the leader that replaced
	// it until it takes part in an election again (docs/bully-ring.md):
	// the check then owes nothing.
	if best < 0 || r.nodes[best].resigned {
		return
	}
	want := r.mems[best]
	for _, n := range r.nodes {
		if n.crashed || n.paused {
			continue
		}
		if n.st.Leader != want.ID {
			r.violate(InvPreferred, "%v after liveness n%d follows %d (epoch %d), want n%d, the live eligible node of highest rank (priority %d)",
				r.o.Checks.Settle, n.idx+1, n.st.Leader, n.st.Epoch, best+1, want.Priority)
			return
		}
	}
}
