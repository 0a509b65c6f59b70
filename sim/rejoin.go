package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/membership"
)

// This file is the membership model's address knowledge (core mode):
// which members each node's memberlist lists, how it learns them, and
// the agent's rejoining (core.Rejoin) that joins through the addresses it
// knows. docs/simulator.md, "The membership model".
//
//   - knows[o][m]: o's memberlist lists m (in any state) or its files —
//     gossip.join, the member snapshot it started with — name m's
//     address. A run starts with every node knowing every other (the
//     cluster formed before it), and nothing but the two faults below
//     takes knowledge away: a dead member's address stays in the
//     snapshot the agent started with, so reaping forgets nothing here.
//   - A join (memberlist's push-pull through an address) from o to x,
//     both running and connected both ways: o learns every member x
//     knows, and x every member o knows; x answers before it merges o.
//     Every start joins gossip.join and the snapshot; the agent's
//     rejoin joins what core.Rejoin plans.
//   - News of a member (its new incarnation, peer id or metadata, and a
//     member's first state after a start) reaches o only from a member
//     that knows o: m's own gossip, if m knows o, or one node x that m's
//     gossip reaches (m knows x) and that knows o. A node that knows
//     nobody hears nothing, and nobody hears of it.
//   - The transport admits only members its node lists: o reaches m only
//     if m knows o.
//
// With every node knowing every other these rules are the model's older
// ones (membermodel.go): news flows wherever memberlist reaches, directly
// or through a third node, and a join teaches nothing. So a schedule
// without the faults below runs as it did before they existed, and the
// rejoin glue runs only in a schedule with one of them (coreRun.rejoin):
// elsewhere it could change nothing, and asking core.Rejoin every 100 ms
// on every node costs a third of a core-mode schedule's CPU.

// checkWiped times every wiped node the others and it have found since
// its restart (Stats.Rejoins); one that crashed again is dropped.
func (r *run) checkWiped() {
	for w, at := range r.cm.wipedAt {
		if at == 0 {
			continue
		}
		if r.nodes[w].crashed {
			r.cm.wipedAt[w] = 0
			continue
		}
		if r.foundEachOther(w) {
			r.cm.wipedAt[w] = 0
			r.stats.addRejoin(r.now - (at - 1))
		}
	}
}

// foundEachOther reports whether w and every other running node list
// each other alive under their current identities.
func (r *run) foundEachOther(w int) bool {
	current := func(o, m int) bool {
		v, mn := r.cm.view[o][m], r.nodes[m]
		return v.known && v.state == membership.StateAlive && v.inc == mn.inc && v.peer == mn.cn.peerID(m)
	}
	for o, on := range r.nodes {
		if o != w && !on.crashed && (!current(o, w) || !current(w, o)) {
			return false
		}
	}
	return true
}

// heardState is a member's state as gossip spread it: its incarnation,
// peer id and metadata generation.
type heardState struct {
	inc  uint32
	peer string
	meta uint32
}

// memberAddr is member i's gossip address.
func memberAddr(i int) string { return fmt.Sprintf("10.0.0.%d:7946", i+1) }

// newKnows returns n nodes' address knowledge at the start of a run:
// every node knows every other.
func newKnows(n int) [][]bool {
	k := make([][]bool, n)
	for i := range k {
		k[i] = make([]bool, n)
		for j := range k[i] {
			k[i][j] = i != j
		}
	}
	return k
}

// informed reports whether news of member m reaches observer o: o knows
// m, and m's gossip reaches o directly (m knows o) or through one node x
// that m knows and that knows o, every link both ways.
func (r *run) informed(o, m int) bool {
	k := r.cm.knows
	if !k[o][m] {
		return false
	}
	if k[m][o] && r.conn[o][m] && r.conn[m][o] {
		return true
	}
	for x, xn := range r.nodes {
		if x == o || x == m || xn.crashed || xn.paused {
			continue
		}
		if k[m][x] && k[x][o] && r.conn[o][x] && r.conn[x][o] && r.conn[x][m] && r.conn[m][x] {
			return true
		}
	}
	return false
}

// join is a push-pull from o through x's address: it fails unless x runs
// and they are connected both ways; then each learns every member the
// other knows. It traces a join that taught either something.
func (r *run) join(o, x int) {
	xn := r.nodes[x]
	if o == x || xn.crashed || xn.paused || xn.cn == nil || xn.cn.c == nil || !r.conn[o][x] || !r.conn[x][o] {
		return
	}
	k := r.cm.knows
	// A push-pull carries both ends' own states.
	r.heardNow(o)
	r.heardNow(x)
	taught := 0
	for m := range r.nodes {
		// x's answer is what it knew before o's state arrived.
		toO := m != o && !k[o][m] && (m == x || k[x][m])
		toX := m != x && !k[x][m] && (m == o || k[o][m])
		if toO {
			k[o][m] = true
			taught++
		}
		if toX {
			k[x][m] = true
			taught++
		}
	}
	if taught > 0 {
		r.rec(traceRec{kind: recInput, node: int32(o), a: inputJoin, b: uint64(x), c: uint64(taught)})
	}
}

// broadcastWindow is how long after a node applied a member's state its
// gossip carries the member: memberlist retransmits a broadcast a few
// times (4·log10(n+1)), to three members every 200 ms.
const broadcastWindow = time.Second

// hearOf lets observer o, which does not know m, learn m's address from
// the gossip of a running node x that knows o and applied an alive
// state of m within broadcastWindow: memberlist spreads changes, not
// member lists, so a node that knows nobody hears only of members that
// change while others gossip to it.
func (r *run) hearOf(o, m int) {
	k := r.cm.knows
	for x, xn := range r.nodes {
		if x == o || x == m || xn.crashed || xn.paused || xn.cn.c == nil || !k[x][o] || !r.conn[x][o] {
			continue
		}
		v := r.cm.view[x][m]
		if v.known && (v.state == membership.StateAlive || v.state == membership.StateSuspect) && r.now-v.changedAt <= broadcastWindow {
			k[o][m] = true
			r.rec(traceRec{kind: recInput, node: int32(o), a: inputHeard, b: uint64(m), c: uint64(x)})
			return
		}
	}
}

// heardNow records node i's current state as heard, if it runs.
func (r *run) heardNow(i int) {
	n := r.nodes[i]
	if n.cn != nil && n.cn.c != nil {
		r.cm.heard[i] = heardState{inc: n.inc, peer: n.cn.peerID(i), meta: n.cn.metaGen}
	}
}

// startMembers sets node n's address knowledge at a start: a wiped node
// knows only cn.wipeKnows (nobody, unless a seed split said whom), has no
// snapshot and keeps the gossip.join the fault gave it; any other keeps
// what it knew, as its member snapshot. It then joins gossip.join and
// the snapshot, as the agent's start does, and starts a new rejoin plan.
func (r *run) startMembers(n *node) {
	cn, k := n.cn, r.cm.knows
	if cn.wiped {
		if cn.wipeKnows == nil {
			r.cm.wipedAt[n.idx] = r.now + 1 // + 1: 0 is none
		}
		for j := range k[n.idx] {
			k[n.idx][j] = slices.Contains(cn.wipeKnows, j)
		}
		cn.wiped, cn.wipeKnows, cn.snap = false, nil, nil
	} else {
		cn.snap = cn.snap[:0]
		for j, known := range k[n.idx] {
			if known {
				cn.snap = append(cn.snap, j)
			}
		}
	}
	cn.rejoin, cn.files = core.RejoinCheck{}, nil
	for _, x := range cn.join {
		r.join(n.idx, x)
	}
	for _, x := range cn.snap {
		r.join(n.idx, x)
	}
}

// rejoinCheck runs the agent's rejoin glue on node n: core.RejoinCheck
// asks core.Rejoin when a plan is due, and n joins through the addresses
// it names. Its generator is the run's seed's, not the run's stream.
func (r *run) rejoinCheck(n *node) {
	cn := n.cn
	if !r.cm.rejoin || r.o.ShellBugs.NoRejoin || cn.c == nil {
		return
	}
	local := r.local(n)
	now := time.Unix(0, int64(local))
	if !cn.rejoin.Due(now) {
		return
	}
	if cn.rejoin.Rejoin == nil {
		cn.rejoin.Rejoin = core.NewRejoin(core.RejoinConfig{}, rand.New(rand.NewPCG(r.seed^0x7265_6a6f_696e, uint64(n.idx)<<32|uint64(n.inc))))
	}
	if cn.files == nil {
		for _, j := range cn.join {
			cn.files = append(cn.files, r.cm.addrList[j])
		}
		cn.nJoin = len(cn.files)
		for _, j := range cn.snap {
			cn.files = append(cn.files, r.cm.addrList[j])
		}
	}
	in := core.RejoinInput{Self: n.member.Name, SelfAddr: r.cm.addrList[n.idx],
		Join: cn.files[:cn.nJoin:cn.nJoin], Snapshot: cn.files[cn.nJoin:]}
	p := cn.rejoin.Ask(now, cn.c, local, in)
	for _, a := range p.Try {
		if x, ok := r.cm.addrs[a]; ok {
			r.join(n.idx, x)
		}
	}
}

// wipedRestart crashes node tgt for action i; it restarts after
// a.Duration knowing nobody (startMembers), under a new identity.
func (r *run) wipedRestart(a Action, i, tgt int) {
	nd := r.nodes[tgt]
	r.isoStart(tgt, a.Kind.String())
	r.crash(nd)
	nd.cn.newIdentity, nd.cn.wiped, nd.cn.wipeKnows, nd.cn.join = true, true, nil, nil
	nd.fault++
	r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(tgt), inc: nd.fault})
}

// seedSplit stages a formation through seed s (FaultSeedSplit): two
// other running nodes restart at once with new identities, knowing only
// the seed (gossip.join names it, they have no snapshot); the seed,
// restarted as a new cluster's first member, answered both joins before
// merging either, so it knows both and they know only it; and it crashed
// at once. It returns after a.Duration from its snapshot, naming the two.
func (r *run) seedSplit(a Action, i, s int) {
	var pair []int
	for _, j := range r.rng.Perm(len(r.nodes)) {
		jn := r.nodes[j]
		if j != s && r.voter(j) && !jn.crashed && !jn.paused && jn.cn.leave == nil && len(pair) < 2 {
			pair = append(pair, j)
		}
	}
	if len(pair) < 2 {
		return
	}
	r.stats.Faults[FaultSeedSplit]++
	r.rec(traceRec{kind: recFault, node: int32(s), a: uint64(FaultSeedSplit), b: uint64(s), c: uint64(pair[0])<<8 | uint64(pair[1])})
	sn := r.nodes[s]
	r.crash(sn)
	sn.cn.newIdentity, sn.cn.join = true, nil
	sn.fault++
	for j := range r.cm.knows[s] {
		r.cm.knows[s][j] = j == pair[0] || j == pair[1]
	}
	for _, j := range pair {
		jn := r.nodes[j]
		r.crash(jn)
		jn.cn.newIdentity, jn.cn.wiped, jn.cn.wipeKnows, jn.cn.join = true, true, []int{s}, []int{s}
		jn.fault++
		// Its start joins the seed, which is down by now: it knows the
		// seed's address and nothing more.
		if r.restart(jn); r.done {
			return
		}
	}
	r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(s), inc: sn.fault})
}

// voter reports whether node i starts as a voter. The address faults
// strike voters only: every member's transport probes a voter (in bully
// and ring every member is one), so the others see a wiped voter answer
// gossip and not the transport, and join it. A wiped observer of
// majority is seen by nobody's transport; the agent finds it through its
// acks to gossip probes (membership/rejoin.go), which the model does not
// have (docs/simulator.md, finding 15).
func (r *run) voter(i int) bool { return i < len(r.voters) }

// memberFault reports whether k is one of the address faults Run draws
// from a stream of its own (drawMemberFaults).
func memberFault(k FaultKind) bool { return k == FaultWipedRestart || k == FaultSeedSplit }

// drawMemberFaults adds the address faults o.Faults names to s, each
// with probability 1/o.AddressFaultOdds (a schedule that draws one runs
// the rejoin glue, and costs more), at a random time in the fault phase. They
// are drawn from a generator of their own, seeded from the run's seed, so
// that a schedule that draws neither is the schedule RandomSchedule drew
// before they existed, and runs as it did.
func drawMemberFaults(seed uint64, o Options, s *Schedule) {
	if !slices.ContainsFunc(o.Faults, memberFault) {
		return
	}
	rng := rand.New(rand.NewPCG(seed, 0x61_6464_7273))
	et := o.ElectionTimeout
	// Both kinds are drawn (and their times and targets) whichever the
	// cell runs, so that leaving one out keeps the other's draws.
	for _, k := range []FaultKind{FaultWipedRestart, FaultSeedSplit} {
		if rng.IntN(o.AddressFaultOdds) != o.AddressFaultOdds-1 {
			continue
		}
		a := Action{At: randDur(rng, s.FaultPhase), Kind: k, Target: TargetRandom}
		switch k {
		case FaultWipedRestart:
			if rng.IntN(2) == 0 {
				a.Target = TargetLeader
			}
			a.Duration = randDur(rng, 10*et)
		case FaultSeedSplit:
			a.Duration = 2*et + randDur(rng, 20*et)
		}
		if !slices.Contains(o.Faults, k) {
			continue
		}
		at := slices.IndexFunc(s.Actions, func(b Action) bool { return b.At > a.At })
		if at < 0 {
			at = len(s.Actions)
		}
		s.Actions = slices.Insert(s.Actions, at, a)
	}
}
