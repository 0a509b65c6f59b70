// Package testnet is the synchronous, deterministic test network the
// protocol packages' tests share, in the style of etcd raft's raft_test.go:
// one virtual clock, messages queued in FIFO order and delivered until every
// node is quiet, and the driver contract (persist, send, announce, advance)
// applied to every Ready. Links can be cut, nodes isolated or crashed and
// messages dropped by a filter; every message is counted by kind.
//
// It is for tests only; the simulator (sim/) is the adversarial harness.
package testnet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Node is what the network needs of a protocol instance: the protocol and
// its deadline, so that lazy ticking can be checked.
type Node interface {
	protocols.Protocol
	protocols.Deadliner
}

// Net drives nodes of one protocol. P is the protocol's concrete type, so
// tests reach its own methods through Nodes.
type Net[P Node] struct {
	T     testing.TB
	Now   protocols.Time
	Nodes map[protocols.ID]P
	// HS is each node's durable state: what its last Ready persisted.
	HS      map[protocols.ID]protocols.HardState
	IDs     []protocols.ID // sorted
	Queue   []protocols.Message
	Cut     map[[2]protocols.ID]bool // directed links that drop
	Crashed map[protocols.ID]bool
	// Drop, when set, drops the messages it returns true for.
	Drop func(protocols.Message) bool
	// Sent counts every message sent by kind, Delivered every one handed
	// to its receiver's Step.
	Sent, Delivered map[protocols.MessageKind]int
	// Make builds node id from its durable state at time now (New,
	// Revive and Restart).
	Make func(id protocols.ID, hs protocols.HardState, now protocols.Time) P
	// Tick is Advance's step of virtual time; every node ticks once per
	// step.
	Tick time.Duration
	// Lazy ticks a node only when its NextDeadline is due, as the agent
	// does, and checks that the status it would have answered in the
	// meantime does not change.
	Lazy bool
	// Announces reports the message kinds that assert an epoch: one must
	// never leave before that epoch is persisted. Nil checks nothing.
	Announces func(protocols.MessageKind) bool
	// Events records every leadership change, and with TraceSends every
	// message sent, as "<time> …" lines; TakeEvents empties it.
	Events     []string
	TraceSends bool
	// EpochName labels SoftState.Epoch in Events ("epoch", or "term" for
	// majority, whose epoch is its term).
	EpochName string
	// Priorities are the members' priorities that Restart's MemberUp
	// carries, as gossip would (nil: all 0).
	Priorities map[protocols.ID]uint8
}

// New builds a network of the given ids; make builds each node. Their
// first Readys wait for the first Collect.
func New[P Node](t testing.TB, ids []protocols.ID, tick time.Duration, make func(id protocols.ID, hs protocols.HardState, now protocols.Time) P) *Net[P] {
	nw := &Net[P]{
		T: t, Nodes: map[protocols.ID]P{}, HS: map[protocols.ID]protocols.HardState{},
		IDs: slices.Sorted(slices.Values(ids)), Cut: map[[2]protocols.ID]bool{},
		Crashed: map[protocols.ID]bool{}, Sent: map[protocols.MessageKind]int{},
		Delivered: map[protocols.MessageKind]int{}, Make: make, Tick: tick, EpochName: "epoch",
	}
	for _, id := range nw.IDs {
		nw.Nodes[id] = make(id, protocols.HardState{}, 0)
	}
	return nw
}

// Members lists ids as members named n<id>.
func Members(ids []protocols.ID) []protocols.Member { return MembersWith(ids, nil) }

// MembersWith lists ids as members named n<id> with the given priorities
// (missing: 0).
func MembersWith(ids []protocols.ID, prio map[protocols.ID]uint8) []protocols.Member {
	var members []protocols.Member
	for _, id := range ids {
		members = append(members, protocols.Member{ID: id, Name: fmt.Sprintf("n%d", id), Priority: prio[id]})
	}
	return members
}

// Seq returns the ids 1…n.
func Seq(n int) []protocols.ID {
	ids := make([]protocols.ID, n)
	for i := range ids {
		ids[i] = protocols.ID(i + 1)
	}
	return ids
}

// Live lists the ids not crashed, in order.
func (nw *Net[P]) Live() []protocols.ID {
	var out []protocols.ID
	for _, id := range nw.IDs {
		if !nw.Crashed[id] {
			out = append(out, id)
		}
	}
	return out
}

// Collect takes every live node's Ready, checking that the persisted epoch
// never goes back and that a risen epoch is persisted together with (so
// before) the messages announcing it. It reports whether there was any.
func (nw *Net[P]) Collect() bool {
	any := false
	for _, id := range nw.Live() {
		if nw.Drain(id) {
			any = true
		}
	}
	return any
}

// Drain applies the driver contract to the Readys of one node.
func (nw *Net[P]) Drain(id protocols.ID) bool {
	n := nw.Nodes[id]
	any := false
	for n.HasReady() {
		rd := n.Ready()
		if rd.HardState != nil {
			if rd.HardState.Epoch < nw.HS[id].Epoch {
				nw.T.Fatalf("node %d: persisted epoch went back %d -> %d", id, nw.HS[id].Epoch, rd.HardState.Epoch)
			}
			nw.HS[id] = *rd.HardState
		}
		for _, m := range rd.Messages {
			if nw.Announces != nil && nw.Announces(m.Kind) && m.Epoch > nw.HS[id].Epoch {
				nw.T.Fatalf("node %d sent %v before persisting its epoch", id, m)
			}
			nw.Queue = append(nw.Queue, m)
			nw.Sent[m.Kind]++
			if nw.TraceSends {
				nw.Events = append(nw.Events, fmt.Sprintf("%v send %v", nw.Now.Sub(0), m))
			}
		}
		if ss := rd.SoftState; ss != nil {
			nw.Events = append(nw.Events, fmt.Sprintf("%v n%d %s leader=%d %s=%d", nw.Now.Sub(0), id, ss.Role, ss.Leader, nw.EpochName, ss.Epoch))
		}
		n.Advance(rd)
		any = true
	}
	return any
}

// Blocked reports whether m is lost: its receiver crashed, its link cut, or
// Drop refuses it.
func (nw *Net[P]) Blocked(m protocols.Message) bool {
	return nw.Crashed[m.To] || nw.Cut[[2]protocols.ID{m.From, m.To}] || (nw.Drop != nil && nw.Drop(m))
}

// Deliver runs until no message is queued and no node has work.
func (nw *Net[P]) Deliver() {
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			nw.T.Fatal("network does not quiesce")
		}
		nw.Collect()
		if len(nw.Queue) == 0 {
			return
		}
		m := nw.Queue[0]
		nw.Queue = nw.Queue[1:]
		if nw.Blocked(m) {
			continue
		}
		if _, ok := nw.Nodes[m.To]; !ok {
			continue
		}
		nw.Delivered[m.Kind]++
		if err := nw.Nodes[m.To].Step(nw.Now, m); err != nil {
			nw.T.Fatalf("step %v: %v", m, err)
		}
	}
}

// Advance moves time forward by d in steps of Tick, ticking every live node
// and delivering after each step.
func (nw *Net[P]) Advance(d time.Duration) {
	for end := nw.Now.Add(d); nw.Now < end; {
		nw.Now = nw.Now.Add(nw.Tick)
		for _, id := range nw.Live() {
			n := nw.Nodes[id]
			if nw.Lazy {
				d, ok := n.NextDeadline(nw.Now)
				if ok && d < nw.Now {
					nw.T.Fatalf("node %d: NextDeadline %v is before now %v", id, d.Sub(0), nw.Now.Sub(0))
				}
				if !ok || d > nw.Now {
					// Sleeping until d is only right if nobody asking
					// before d would hear another answer (a lease ending).
					until := nw.Now.Add(time.Hour)
					if ok {
						until = d - 1
					}
					if a, b := n.Status(nw.Now), n.Status(until); a != b {
						nw.T.Fatalf("node %d: status changes from %+v to %+v before its deadline", id, a, b)
					}
					continue
				}
			}
			n.Tick(nw.Now)
		}
		nw.Deliver()
	}
}

// ResetCounts zeroes Sent and Delivered.
func (nw *Net[P]) ResetCounts() {
	nw.Sent = map[protocols.MessageKind]int{}
	nw.Delivered = map[protocols.MessageKind]int{}
}

// Isolate cuts every link of id in both directions.
func (nw *Net[P]) Isolate(id protocols.ID) {
	for _, o := range nw.IDs {
		if o != id {
			nw.Cut[[2]protocols.ID{id, o}] = true
			nw.Cut[[2]protocols.ID{o, id}] = true
		}
	}
}

// Partition cuts every link between the two groups.
func (nw *Net[P]) Partition(a, b []protocols.ID) {
	for _, x := range a {
		for _, y := range b {
			nw.Cut[[2]protocols.ID{x, y}] = true
			nw.Cut[[2]protocols.ID{y, x}] = true
		}
	}
}

// Heal restores every link.
func (nw *Net[P]) Heal() { nw.Cut = map[[2]protocols.ID]bool{} }

// Crash stops id, losing its volatile state; every other live node is told
// it is down when tell is set (reliable detection).
func (nw *Net[P]) Crash(id protocols.ID, tell bool) {
	nw.Crashed[id] = true
	if tell {
		for _, o := range nw.Live() {
			nw.Nodes[o].MemberDown(nw.Now, id)
		}
	}
}

// Revive rebuilds id from its durable state; nobody is told.
func (nw *Net[P]) Revive(id protocols.ID) {
	nw.Crashed[id] = false
	nw.Nodes[id] = nw.Make(id, nw.HS[id], nw.Now)
}

// Restart revives id and tells the others it is up.
func (nw *Net[P]) Restart(id protocols.ID) {
	nw.Revive(id)
	for _, o := range nw.Live() {
		if o != id {
			nw.Nodes[o].MemberUp(nw.Now, protocols.Member{ID: id, Name: fmt.Sprintf("n%d", id), Priority: nw.Priorities[id]})
		}
	}
}

// Leaders returns the live nodes that report themselves leader.
func (nw *Net[P]) Leaders() []protocols.ID {
	var out []protocols.ID
	for _, id := range nw.Live() {
		if nw.Nodes[id].Status(nw.Now).Role == protocols.Leader {
			out = append(out, id)
		}
	}
	return out
}

// Agreed fails unless every live node names want as leader with one epoch,
// and returns that epoch.
func (nw *Net[P]) Agreed(want protocols.ID) uint64 {
	nw.T.Helper()
	var epoch uint64
	for _, id := range nw.Live() {
		s := nw.Nodes[id].Status(nw.Now)
		if s.Leader != want {
			nw.T.Fatalf("node %d: leader %d, want %d (status %+v)", id, s.Leader, want, s)
		}
		if epoch == 0 {
			epoch = s.Epoch
		} else if s.Epoch != epoch {
			nw.T.Fatalf("node %d: epoch %d, others %d", id, s.Epoch, epoch)
		}
	}
	if l := nw.Leaders(); len(l) != 1 || l[0] != want {
		nw.T.Fatalf("leaders %v, want [%d]", l, want)
	}
	return epoch
}

// AgreesOn reports whether every live node names want as leader in one
// epoch and want alone reports itself leader.
func (nw *Net[P]) AgreesOn(want protocols.ID) bool {
	var epoch uint64
	for _, id := range nw.Live() {
		s := nw.Nodes[id].Status(nw.Now)
		if s.Leader != want || (epoch != 0 && s.Epoch != epoch) {
			return false
		}
		epoch = s.Epoch
	}
	l := nw.Leaders()
	return len(l) == 1 && l[0] == want
}

// TimeToAgree advances virtual time one Tick at a time until every live node
// agrees on want, and returns how long that took; it fails after limit.
func (nw *Net[P]) TimeToAgree(want protocols.ID, limit time.Duration) time.Duration {
	nw.T.Helper()
	start := nw.Now
	for !nw.AgreesOn(want) {
		if nw.Now.Sub(start) >= limit {
			nw.T.Fatalf("no agreement on %d after %v", want, limit)
		}
		nw.Advance(nw.Tick)
	}
	return nw.Now.Sub(start)
}

// TakeEvents returns the recorded events, one a line, and forgets them.
func (nw *Net[P]) TakeEvents() string {
	out := strings.Join(nw.Events, "\n")
	nw.Events = nil
	if out != "" {
		out += "\n"
	}
	return out
}

// Status describes every live node, one a line, for golden files.
func (nw *Net[P]) Status() string {
	var b strings.Builder
	for _, id := range nw.Live() {
		st := nw.Nodes[id].Status(nw.Now)
		fmt.Fprintf(&b, "n%d: %s leader=%d epoch=%d", id, st.Role, st.Leader, st.Epoch)
		if st.LeaseUntil != 0 {
			fmt.Fprintf(&b, " lease=%v", st.LeaseUntil.Sub(nw.Now))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
