package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// network is a synchronous, deterministic test network in the style of
// etcd raft's raft_test.go: messages queue in FIFO order and deliver drains
// the queue until every node is quiet. Links can be cut, nodes isolated or
// crashed, and messages dropped by a filter; every delivered message is
// counted by kind.
type network struct {
	t      testing.TB
	now    protocols.Time
	nodes  map[protocols.ID]*Node
	hs     map[protocols.ID]protocols.HardState // durable state per node
	ids    []protocols.ID
	queue  []protocols.Message
	cut    map[[2]protocols.ID]bool
	crashd map[protocols.ID]bool
	drop   func(protocols.Message) bool
	counts map[protocols.MessageKind]int
	sent   int
	mk     func(id protocols.ID, hs protocols.HardState) *Node
	order  []protocols.ID // ring order override for every node; nil: by id
	// lazy ticks a node only when its NextDeadline is due, as the agent
	// does; otherwise every node ticks every millisecond.
	lazy bool
	// trace, when non-nil, records every message sent and every
	// leadership change.
	trace *[]string
}

// newNetwork builds nodes with the given ids; tweak may adjust each Config.
func newNetwork(t testing.TB, ids []protocols.ID, tweak func(*Config)) *network {
	nw := &network{
		t: t, nodes: map[protocols.ID]*Node{}, hs: map[protocols.ID]protocols.HardState{},
		ids: slices.Sorted(slices.Values(ids)), cut: map[[2]protocols.ID]bool{},
		crashd: map[protocols.ID]bool{}, counts: map[protocols.MessageKind]int{},
	}
	var members []protocols.Member
	for _, id := range nw.ids {
		members = append(members, protocols.Member{ID: id, Name: fmt.Sprintf("n%d", id)})
	}
	nw.mk = func(id protocols.ID, hs protocols.HardState) *Node {
		cfg := Config{
			ID: id, Members: members, HardState: hs, Now: nw.now,
			HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			Rand: rand.New(rand.NewPCG(uint64(id), 1)),
		}
		if tweak != nil {
			tweak(&cfg)
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatalf("New(%d): %v", id, err)
		}
		n.order = slices.Clone(nw.order)
		return n
	}
	for _, id := range nw.ids {
		nw.nodes[id] = nw.mk(id, protocols.HardState{})
	}
	return nw
}

// collect takes every node's Ready, checking that a risen epoch is always
// persisted together with (before) the messages announcing it.
func (nw *network) collect() bool {
	any := false
	for _, id := range nw.ids {
		n := nw.nodes[id]
		if nw.crashd[id] {
			continue
		}
		for n.HasReady() {
			rd := n.Ready()
			if rd.HardState != nil {
				if rd.HardState.Epoch < nw.hs[id].Epoch {
					nw.t.Fatalf("node %d: persisted epoch went back %d -> %d", id, nw.hs[id].Epoch, rd.HardState.Epoch)
				}
				nw.hs[id] = *rd.HardState
			}
			for _, m := range rd.Messages {
				if m.Epoch > nw.hs[id].Epoch && (m.Kind == protocols.MsgRingLeader || m.Kind == protocols.MsgHeartbeat) {
					nw.t.Fatalf("node %d sent %v before persisting its epoch", id, m)
				}
				nw.queue = append(nw.queue, m)
				nw.sent++
				if nw.trace != nil {
					*nw.trace = append(*nw.trace, fmt.Sprintf("%v send %v", nw.now.Sub(0), m))
				}
			}
			if ss := rd.SoftState; ss != nil && nw.trace != nil {
				*nw.trace = append(*nw.trace, fmt.Sprintf("%v n%d %s leader=%d epoch=%d", nw.now.Sub(0), id, ss.Role, ss.Leader, ss.Epoch))
			}
			n.Advance(rd)
			any = true
		}
	}
	return any
}

func (nw *network) blocked(m protocols.Message) bool {
	return nw.crashd[m.To] || nw.cut[[2]protocols.ID{m.From, m.To}] || (nw.drop != nil && nw.drop(m))
}

// deliver runs until no message is queued and no node has work.
func (nw *network) deliver() {
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			nw.t.Fatal("network does not quiesce")
		}
		nw.collect()
		if len(nw.queue) == 0 {
			return
		}
		m := nw.queue[0]
		nw.queue = nw.queue[1:]
		if nw.blocked(m) {
			continue
		}
		nw.counts[m.Kind]++
		if err := nw.nodes[m.To].Step(nw.now, m); err != nil {
			nw.t.Fatalf("step %v: %v", m, err)
		}
	}
}

// advance moves time forward by d in steps of one tick, delivering after
// each.
func (nw *network) advance(d time.Duration) {
	const tick = time.Millisecond
	for end := nw.now.Add(d); nw.now < end; {
		nw.now = nw.now.Add(tick)
		for _, id := range nw.ids {
			if nw.crashd[id] {
				continue
			}
			n := nw.nodes[id]
			if nw.lazy {
				d, ok := n.NextDeadline(nw.now)
				if ok && d < nw.now {
					nw.t.Fatalf("node %d: NextDeadline %v is before now %v", id, d.Sub(0), nw.now.Sub(0))
				}
				if !ok || d > nw.now {
					// Sleeping until d is only right if nobody asking
					// before d would hear another answer.
					until := nw.now.Add(time.Hour)
					if ok {
						until = d - 1
					}
					if a, b := n.Status(nw.now), n.Status(until); a != b {
						nw.t.Fatalf("node %d: status changes from %+v to %+v before its deadline", id, a, b)
					}
					continue
				}
			}
			n.Tick(nw.now)
		}
		nw.deliver()
	}
}

// setOrder arranges the ring in the given clockwise order instead of by id
// (test-only: it models the id arrangements of the textbook analyses).
func (nw *network) setOrder(order []protocols.ID) {
	nw.order = order
	for _, n := range nw.nodes {
		n.order = slices.Clone(order)
	}
}

func (nw *network) resetCounts() {
	nw.counts = map[protocols.MessageKind]int{}
}

// isolate cuts every link of id in both directions.
func (nw *network) isolate(id protocols.ID) {
	for _, o := range nw.ids {
		if o != id {
			nw.cut[[2]protocols.ID{id, o}] = true
			nw.cut[[2]protocols.ID{o, id}] = true
		}
	}
}

// partition cuts every link between the two groups.
func (nw *network) partition(a, b []protocols.ID) {
	for _, x := range a {
		for _, y := range b {
			nw.cut[[2]protocols.ID{x, y}] = true
			nw.cut[[2]protocols.ID{y, x}] = true
		}
	}
}

func (nw *network) heal() { nw.cut = map[[2]protocols.ID]bool{} }

// crash stops id, losing its volatile state; every other node is told it is
// down when tell is set (reliable detection).
func (nw *network) crash(id protocols.ID, tell bool) {
	nw.crashd[id] = true
	if tell {
		for _, o := range nw.ids {
			if o != id && !nw.crashd[o] {
				nw.nodes[o].MemberDown(nw.now, id)
			}
		}
	}
}

// restart rebuilds id from its durable state and tells the others it is up.
func (nw *network) restart(id protocols.ID) {
	nw.crashd[id] = false
	nw.nodes[id] = nw.mk(id, nw.hs[id])
	for _, o := range nw.ids {
		if o != id && !nw.crashd[o] {
			nw.nodes[o].MemberUp(nw.now, protocols.Member{ID: id, Name: fmt.Sprintf("n%d", id)})
		}
	}
}

// leaders returns the live nodes that report themselves leader.
func (nw *network) leaders() []protocols.ID {
	var out []protocols.ID
	for _, id := range nw.ids {
		if !nw.crashd[id] && nw.nodes[id].Status(nw.now).Role == protocols.Leader {
			out = append(out, id)
		}
	}
	return out
}

// agreed fails unless every live node names want as leader with one epoch,
// and returns that epoch.
func (nw *network) agreed(want protocols.ID) uint64 {
	nw.t.Helper()
	var epoch uint64
	for _, id := range nw.ids {
		if nw.crashd[id] {
			continue
		}
		s := nw.nodes[id].Status(nw.now)
		if s.Leader != want {
			nw.t.Fatalf("node %d: leader %d, want %d (status %+v)", id, s.Leader, want, s)
		}
		if epoch == 0 {
			epoch = s.Epoch
		} else if s.Epoch != epoch {
			nw.t.Fatalf("node %d: epoch %d, others %d", id, s.Epoch, epoch)
		}
	}
	if l := nw.leaders(); len(l) != 1 || l[0] != want {
		nw.t.Fatalf("leaders %v, want [%d]", l, want)
	}
	return epoch
}

func seq(n int) []protocols.ID {
	ids := make([]protocols.ID, n)
	for i := range ids {
		ids[i] = protocols.ID(i + 1)
	}
	return ids
}
