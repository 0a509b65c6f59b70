package sim

import (
	"fmt"
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

func (r *run) violate(inv, format string, args ...any) {
	if r.viol != nil {
		return
	}
	v := &Violation{Seed: r.seed, Invariant: inv, Detail: fmt.Sprintf(format, args...), At: r.now}
	for _, n := range r.nodes {
		v.Nodes = append(v.Nodes, r.describe(n))
		if n.cn != nil {
			v.Nodes = append(v.Nodes, r.describeElections(n)...)
		}
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

// write is a leader's attempt on the fenced resource, which keeps the
// highest epoch it accepted and refuses lower ones.
func (r *run) write(n *node, epoch uint64) { r.writeTo(&r.fence, &r.o.Checks, "", n, epoch) }

// writeTo is write to one election's fenced resource f; label names the
// election ("" for the default one).
func (r *run) writeTo(f *fence, c *Checks, label string, n *node, epoch uint64) {
	switch {
	case f.set && epoch < f.high:
		r.stats.FencedRejected++
		r.rec(traceRec{kind: recWrite, node: int32(n.idx), a: epoch, el: label})
		return
	case f.set && epoch == f.high && f.node != n.idx:
		if c.Fencing {
			in := ""
			if label != "" {
				in = "election " + label + ": "
			}
			r.violate(InvFencing, "%sfenced resource accepted epoch %d from n%d and from n%d", in, epoch, f.node+1, n.idx+1)
			return
		}
	}
	r.stats.FencedWrites++
	if !f.set || epoch != f.high || f.node != n.idx {
		r.rec(traceRec{kind: recWrite, node: int32(n.idx), a: epoch, b: 1, el: label})
	}
	f.set, f.high, f.node = true, epoch, n.idx
}

// check verifies the invariants over every live node: O(nodes) per event,
// with the epoch map consulted only when a node's view changed; then the
// named elections' (Options.Elections) and the isolation watch.
func (r *run) check() {
	w := r.writer
	r.checkDefault()
	if len(r.el) > 0 && !r.done {
		r.checkElections(w)
	}
	if r.iso.on && !r.done {
		r.checkIsolation()
	}
}

// checkDefault is check for the default election.
func (r *run) checkDefault() {
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
			if ended := r.cm == nil || !r.startProbe(first, l.Epoch); ended && r.electionsLive() {
				r.endOrProbe()
			}
		}
		r.rec(traceRec{kind: recLive, node: int32(first), a: l.Epoch})
	}
}

// claims records and cross-checks who n says leads st.Epoch.
func (r *run) claims(n *node, st protocols.Status) {
	r.claimsIn(r.leaderOf, &r.o.Checks, "", n, st, func(epoch uint64) { r.elected(n, epoch) })
}

// claimsIn is claims for one election: leaderOf is its claims by epoch,
// c its checks, label its name in violations ("" for the default one),
// elected what a first claim by the leader itself sets off.
func (r *run) claimsIn(leaderOf map[uint64]claim, c *Checks, label string, n *node, st protocols.Status, elected func(uint64)) {
	in := ""
	if label != "" {
		in = "election " + label + ": "
	}
	self := st.Role == protocols.Leader
	who := st.Leader
	if self {
		if who != protocols.None && who != n.member.ID && c.AgreeOnLeaderOfEpoch {
			r.violate(InvAgree, "%sn%d reports Role=leader but Leader=%d in epoch %d", in, n.idx+1, who, st.Epoch)
			return
		}
		who = n.member.ID
	}
	if who == protocols.None {
		return
	}
	prev, ok := leaderOf[st.Epoch]
	switch {
	case !ok:
		leaderOf[st.Epoch] = claim{leader: who, by: int32(n.idx), self: self}
		if self {
			elected(st.Epoch)
		}
	case prev.leader == who:
		if self && !prev.self {
			prev.self = true
			leaderOf[st.Epoch] = prev
			elected(st.Epoch)
		}
	case self && prev.self:
		if c.SingleLeaderPerEpoch {
			r.violate(InvSingleLeader, "%sn%d and n%d both led epoch %d", in, prev.leader, n.idx+1, st.Epoch)
		}
	default:
		if c.AgreeOnLeaderOfEpoch {
			r.violate(InvAgree, "%sn%d says n%d leads epoch %d, but n%d said n%d", in, n.idx+1, who, st.Epoch, prev.by+1, prev.leader)
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
