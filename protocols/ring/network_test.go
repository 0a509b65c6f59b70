package ring

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// network is the shared test network (protocols/internal/testnet) of ring
// nodes, with the ring order tests may override.
type network struct {
	*testnet.Net[*Node]
	order []protocols.ID // ring order override for every node; nil: by id
}

// newNetwork builds nodes with the given ids, every node ticking each
// millisecond with a 10 ms heartbeat and a 100 ms election timeout; tweak
// may adjust each Config.
func newNetwork(t testing.TB, ids []protocols.ID, tweak func(*Config)) *network {
	members := testnet.Members(ids)
	nw := &network{}
	mk := func(id protocols.ID, hs protocols.HardState, now protocols.Time) *Node {
		cfg := Config{
			ID: id, Members: members, HardState: hs, Now: now,
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
	nw.Net = testnet.New(t, ids, time.Millisecond, mk)
	nw.Announces = func(k protocols.MessageKind) bool {
		return k == protocols.MsgRingLeader || k == protocols.MsgHeartbeat
	}
	return nw
}

// setOrder arranges the ring in the given clockwise order instead of by id
// (test-only: it models the id arrangements of the textbook analyses).
func (nw *network) setOrder(order []protocols.ID) {
	nw.order = order
	for _, n := range nw.Nodes {
		n.order = slices.Clone(order)
	}
}

var seq = testnet.Seq
