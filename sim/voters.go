package sim

import (
	"strings"

	"github.com/conclave-agent/conclave/protocols"
)

// configCheck is the checker's record of the voter configurations seen in
// nodes' Status (docs/voters.md).
type configCheck struct {
	// seen maps every configuration version to its voters.
	seen map[[2]uint64]string
	// committed maps every committed index to its voters; last is the
	// newest committed configuration.
	committed map[uint64]string
	last      protocols.Configuration
	// order lists the committed configurations by index.
	order []protocols.Configuration
	// persisted maps every configuration version to the voters of it that
	// ever persisted it.
	persisted map[[2]uint64]map[string]bool
}

// persistedConfig records that n persisted the configuration in n.hs.
func (r *run) persistedConfig(n *node) {
	c := n.hs.Config
	if !r.o.Checks.Configurations || c.Voters == "" || !c.Has(n.member.Name) {
		return
	}
	k := &r.cfg
	if k.persisted == nil {
		k.persisted = make(map[[2]uint64]map[string]bool)
	}
	v := [2]uint64{c.Term, c.Index}
	if k.persisted[v] == nil {
		k.persisted[v] = make(map[string]bool)
	}
	k.persisted[v][n.member.Name] = true
}

// checkConfig checks n's configurations as reported in st.
func (r *run) checkConfig(n *node, st protocols.Status) {
	k := &r.cfg
	if k.seen == nil {
		k.seen = make(map[[2]uint64]string)
		k.committed = make(map[uint64]string)
	}
	if c := st.Config; c.Voters != "" {
		v := [2]uint64{c.Term, c.Index}
		if prev, ok := k.seen[v]; !ok {
			k.seen[v] = c.Voters
		} else if prev != c.Voters && c.Index != 0 {
			// Index 0 is a bootstrap list from the config file; those may
			// differ, and the protocol must cope.
			r.violate(InvConfigHistory, "n%d holds configuration %v, but another node held [%s] under the same version", n.idx+1, c, prev)
			return
		}
	}
	c := st.Committed
	if c.Voters == "" || c.Index == 0 {
		return
	}
	if prev, ok := k.committed[c.Index]; ok {
		if prev != c.Voters {
			r.violate(InvConfigCommitted, "n%d reports configuration %v committed, but [%s] was committed at index %d", n.idx+1, c, prev, c.Index)
		}
		return
	}
	if got, need := len(k.persisted[[2]uint64{c.Term, c.Index}]), c.Len()/2+1; c.Term != 0 && got < need {
		// Committed means a majority of the new set persisted it; an
		// index-1 list of term 0 comes from an old state record.
		r.violate(InvConfigCommitted, "n%d reports %v committed, but only %d of its voters ever persisted it (%d needed)", n.idx+1, c, got, need)
		return
	}
	k.committed[c.Index] = c.Voters
	if c.Index > k.last.Index {
		if k.last.Voters != "" && voterDiff(k.last.Voters, c.Voters) > 1 {
			r.violate(InvConfigCommitted, "n%d committed %v after %v: more than one voter changed", n.idx+1, c, k.last)
			return
		}
		k.last = c
		k.order = append(k.order, c)
	}
}

// checkLeaderConfig checks that a node first seen leading epoch st.Epoch
// holds every configuration committed in earlier terms: the one it holds,
// or, when it already proposed one in its own term (at least the inherited
// one, re-committed on election), the one it inherited — whose index is
// below that of its own proposals.
func (r *run) checkLeaderConfig(n *node, st protocols.Status) {
	c := st.Config
	if c.Voters == "" {
		return
	}
	var before protocols.Configuration
	for i := len(r.cfg.order) - 1; i >= 0; i-- {
		if r.cfg.order[i].Term < st.Term {
			before = r.cfg.order[i]
			break
		}
	}
	if before.Voters == "" {
		return
	}
	ok := c.Index >= before.Index
	if c.Term == st.Term {
		ok = c.Index > before.Index
	}
	if !ok {
		r.violate(InvConfigComplete, "n%d leads epoch %d with configuration %v, but %v was committed before", n.idx+1, st.Epoch, c, before)
	}
}

// voterDiff counts the voters in one list but not the other.
func voterDiff(a, b string) int {
	in := make(map[string]int)
	for v := range strings.SplitSeq(a, ",") {
		in[v]++
	}
	for v := range strings.SplitSeq(b, ",") {
		in[v]--
	}
	d := 0
	for _, c := range in {
		if c != 0 {
			d++
		}
	}
	return d
}

// voterChange asks the current leader to add a random non-voter or remove a
// random voter (sometimes itself).
func (r *run) voterChange() {
	if r.curLead < 0 {
		return
	}
	nd := r.nodes[r.curLead]
	vc, ok := nd.p.(protocols.VoterChanger)
	if nd.crashed || nd.paused || !ok {
		return
	}
	now := r.local(nd)
	conf := nd.p.Status(now).Config
	var voters, others []string
	for _, m := range r.mems {
		if conf.Has(m.Name) {
			voters = append(voters, m.Name)
		} else {
			others = append(others, m.Name)
		}
	}
	var ch protocols.VoterChange
	switch {
	case len(voters) > 1 && r.rng.IntN(4) == 0:
		ch.Remove = nd.member.Name // the leader removes itself
	case len(others) > 0 && (len(voters) <= 1 || r.rng.IntN(2) == 0):
		ch.Add = others[r.rng.IntN(len(others))]
	case len(voters) > 1:
		ch.Remove = voters[r.rng.IntN(len(voters))]
	default:
		return
	}
	tgt := r.curLead
	r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(FaultVoterChange), b: uint64(tgt)})
	if err := vc.ChangeVoters(now, ch); err != nil {
		r.rec(traceRec{kind: recStepErr, node: int32(tgt), err: err})
	} else {
		r.stats.Faults[FaultVoterChange]++
	}
	r.drain(nd)
}
