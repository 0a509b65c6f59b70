package sim

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/membership"
)

// The membership model of core mode: what memberlist tells each agent, and
// when, where it matters to the core's policy.
//
//   - Join lag: an observer learns a member (or its new incarnation after a
//     restart, or its new peer id) joinLagMax at most after both run and
//     reach each other, directly or through a third node.
//   - Late death: a member crashed, paused, or unreachable both ways and
//     not through any third node is declared suspect halfway and dead
//     after a delay drawn from [deathMin, deathMin+deathSpread]; it comes
//     back alive if reached before that. A member that left gracefully is
//     declared left after a gossip delay instead.
//   - A member that restarts quicker than that is never seen to die: the
//     observer gets an alive update with a new incarnation (and, after
//     FaultRestartNewPeer, another peer id).
//   - Reaping: a dead or left member is forgotten reapMin..reapMin+
//     reapSpread later.
//
// Numeric ids never change: a member that came back with another id would
// need the run to map ids to nodes anew, and every checker invariant keys
// on ids; core/members_test.go covers that path instead.
const (
	membersScan = 50 * time.Millisecond
	joinLagMax  = time.Second
	deathMin    = 1500 * time.Millisecond
	deathSpread = 3500 * time.Millisecond
	leaveMin    = gossipMinDelay
	leaveSpread = gossipSpread
	reapMin     = 8 * time.Second
	reapSpread  = 7 * time.Second
)

// memberView is what one observer's memberlist says about one member.
type memberView struct {
	known bool
	state membership.State
	inc   uint32 // the member's incarnation (node.inc) known
	peer  string // the member's peer id known
	meta  uint32 // the member's metadata generation (coreNode.metaGen) known
	// due is when the pending alive update becomes known (0: none) and
	// dueInc and duePeer what it says.
	due     time.Duration
	dueInc  uint32
	duePeer string
	dueMeta uint32
	// unreachSince is when the member became unreachable (0: it is not),
	// and deathAfter how long until it is declared dead (or left).
	unreachSince time.Duration
	deathAfter   time.Duration
	// goneAt is when it was declared dead or left; reapAfter how long
	// until it is reaped.
	goneAt    time.Duration
	reapAfter time.Duration
	// changedAt is when the observer last applied a state of the
	// member: for broadcastWindow after it, its gossip spreads the
	// member to the nodes it lists (rejoin.go).
	changedAt time.Duration
}

// scanMembers advances every observer's view of every member.
func (r *run) scanMembers() {
	for o, on := range r.nodes {
		if on.crashed || on.paused || on.cn.c == nil {
			continue // a paused memberlist does nothing either
		}
		for m := range r.nodes {
			if on.crashed || on.cn.c == nil {
				// A member event just finished this node's leave (its
				// core's hand-over ended): it is stopped now.
				break
			}
			if m != o {
				r.scanMember(on, m)
				if r.done {
					return
				}
			}
		}
	}
	for _, on := range r.nodes {
		if !on.crashed && !on.paused {
			r.rejoinCheck(on)
		}
	}
	r.checkWiped()
}

func (r *run) scanMember(on *node, m int) {
	if !r.cm.knows[on.idx][m] {
		r.hearOf(on.idx, m)
	}
	mn := r.nodes[m]
	v := &r.cm.view[on.idx][m]
	running := !mn.crashed
	reach := running && !mn.paused && r.reachable(on.idx, m)
	live := v.known && (v.state == membership.StateAlive || v.state == membership.StateSuspect)
	peer := mn.cn.peerID(m)
	switch {
	case reach:
		v.unreachSince = 0
		meta := mn.cn.metaGen
		if live && v.inc == mn.inc && v.peer == peer && v.meta == meta {
			if v.state == membership.StateSuspect {
				r.applyMember(on, m, membership.StateAlive) // refuted
			}
			return
		}
		inc := mn.inc
		if !r.informed(on.idx, m) {
			// It answers memberlist's probes, but no news of it
			// reaches this observer (rejoin.go). One that knows its
			// address but holds no state of it got the last state
			// anyone heard, in a push-pull's answer; one that holds a
			// state keeps it.
			pub := r.cm.heard[m]
			if v.known || !r.cm.knows[on.idx][m] || pub.peer == "" {
				v.due = 0
				return
			}
			inc, peer, meta = pub.inc, pub.peer, pub.meta
		}
		if v.due == 0 || v.dueInc != inc || v.duePeer != peer || v.dueMeta != meta {
			v.due, v.dueInc, v.duePeer, v.dueMeta = r.now+1+randDur(r.rng, joinLagMax), inc, peer, meta
			return
		}
		if r.now >= v.due {
			v.due, v.inc, v.peer, v.meta = 0, v.dueInc, v.duePeer, v.dueMeta
			if h := &r.cm.heard[m]; v.inc == mn.inc && v.peer == mn.cn.peerID(m) {
				h.inc, h.peer, h.meta = v.inc, v.peer, v.meta
			}
			r.applyMember(on, m, membership.StateAlive)
		}
	case live:
		v.due = 0
		if v.unreachSince == 0 {
			v.unreachSince = r.now
			v.deathAfter = deathMin + randDur(r.rng, deathSpread)
			if mn.cn.left {
				v.deathAfter = leaveMin + randDur(r.rng, leaveSpread)
			}
			return
		}
		gone := r.now - v.unreachSince
		switch {
		case gone >= v.deathAfter:
			st := membership.StateDead
			if mn.cn.left {
				st = membership.StateLeft
			}
			v.unreachSince, v.goneAt = 0, r.now
			v.reapAfter = reapMin + randDur(r.rng, reapSpread)
			r.applyMember(on, m, st)
		case gone >= v.deathAfter/2 && v.state == membership.StateAlive && !mn.cn.left:
			r.applyMember(on, m, membership.StateSuspect)
		}
	case v.known:
		v.due = 0
		if r.now-v.goneAt >= v.reapAfter {
			r.applyMember(on, m, membership.StateReaped)
			*v = memberView{}
		}
	default:
		v.due = 0
	}
}

// reachable reports whether memberlist on a reaches b: directly both ways,
// or through a third running node (an indirect probe).
func (r *run) reachable(a, b int) bool {
	if r.conn[a][b] && r.conn[b][a] {
		return true
	}
	for k, kn := range r.nodes {
		if k == a || k == b || kn.crashed || kn.paused {
			continue
		}
		if r.conn[a][k] && r.conn[k][a] && r.conn[k][b] && r.conn[b][k] {
			return true
		}
	}
	return false
}

// applyMember hands observer on a membership event about member m.
func (r *run) applyMember(on *node, m int, st membership.State) {
	v := &r.cm.view[on.idx][m]
	v.known, v.state, v.changedAt = true, st, r.now
	mem := r.mems[m]
	ev := membership.Member{
		Name: mem.Name, ID: mem.ID, Priority: mem.Priority,
		Addr:   memberAddr(m),
		PeerID: v.peer, PeerAddr: fmt.Sprintf("/ip4/10.0.0.%d/tcp/7947", m+1),
		State:  st,
		Digest: r.nodes[m].cn.digest, DigestExt: r.nodes[m].cn.digestExt,
	}
	r.rec(traceRec{kind: recInput, node: int32(on.idx), a: inputMember, b: uint64(m), c: uint64(st)})
	on.cn.c.ApplyMember(r.local(on), ev)
	for _, e := range on.cn.els {
		// Every election hears every membership event, as in the agent.
		e.c.ApplyMember(r.local(on), ev)
	}
	r.drainCore(on)
}
