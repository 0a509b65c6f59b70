package bully

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// network is the shared test network (protocols/internal/testnet) of bully
// nodes.
type network struct {
	*testnet.Net[*Node]
}

// newNetwork builds nodes with the given ids, every node ticking each
// millisecond with a 10 ms heartbeat and a 100 ms election timeout; tweak
// may adjust each Config.
func newNetwork(t testing.TB, ids []protocols.ID, tweak func(*Config)) *network {
	members := testnet.Members(ids)
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
		return n
	}
	nw := &network{testnet.New(t, ids, time.Millisecond, mk)}
	nw.Announces = func(k protocols.MessageKind) bool {
		return k == protocols.MsgCoordinator || k == protocols.MsgHeartbeat
	}
	return nw
}

var seq = testnet.Seq
