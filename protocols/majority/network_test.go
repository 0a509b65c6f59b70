package majority

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// testNet is the shared test network (protocols/internal/testnet) of
// majority nodes ticking every testTick, with every node's leadership
// changes recorded for the golden files.
type testNet struct {
	*testnet.Net[*Node]
	cfg     Config
	members []protocols.Member
	seed    uint64
}

const testTick = 10 * time.Millisecond

func baseConfig() Config {
	return Config{
		ElectionTimeout:   time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		PreVote:           true,
		CheckQuorum:       true,
		MaxClockDrift:     0.01,
	}
}

// newTestNet starts n voters named n1…nN with ids 1…N (plus observers
// named o<i> with the following ids).
func newTestNet(n, observers int, seed uint64, cfg Config) *testNet {
	tn := &testNet{cfg: cfg, seed: seed}
	var voters []string
	var ids []protocols.ID
	for i := 1; i <= n+observers; i++ {
		name := fmt.Sprintf("n%d", i)
		if i > n {
			name = fmt.Sprintf("o%d", i)
		} else {
			voters = append(voters, name)
		}
		tn.members = append(tn.members, protocols.Member{ID: protocols.ID(i), Name: name})
		ids = append(ids, protocols.ID(i))
	}
	tn.cfg.Voters = voters
	tn.Net = testnet.New(panicTB{}, ids, testTick, tn.make)
	tn.EpochName = "term"
	tn.Collect()
	return tn
}

func (tn *testNet) make(id protocols.ID, hs protocols.HardState, now protocols.Time) *Node {
	c := tn.cfg
	c.ID = id
	c.Members = tn.members
	c.HardState = hs
	c.Now = now
	c.Rand = rand.New(rand.NewPCG(tn.seed, uint64(id)*7919+uint64(now)))
	n, err := New(c)
	if err != nil {
		panic(err)
	}
	return n
}

// start (re)starts id from its disk, telling nobody.
func (tn *testNet) start(id protocols.ID) {
	tn.Revive(id)
	tn.Drain(id)
}

// crash stops id; its node is gone from Nodes until start.
func (tn *testNet) crash(id protocols.ID) {
	tn.Crash(id, false)
	delete(tn.Nodes, id)
}

// runUntilLeader advances until some node holds a lease, for at most max.
func (tn *testNet) runUntilLeader(max time.Duration) (protocols.ID, time.Duration) {
	start := tn.Now
	for tn.Now.Sub(start) < max {
		if l := tn.leader(); l != protocols.None {
			return l, tn.Now.Sub(start)
		}
		tn.Advance(testTick)
	}
	return protocols.None, tn.Now.Sub(start)
}

// leader returns the node that reports itself leader now, or None.
func (tn *testNet) leader() protocols.ID {
	if l := tn.Leaders(); len(l) > 0 {
		return l[0]
	}
	return protocols.None
}

// panicTB fails a network built outside a test (benchmarks' helpers and
// the golden runner share it) by panicking.
type panicTB struct{ testing.TB }

func (panicTB) Helper() {}

func (panicTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func (panicTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// stall freezes the processes of ids for d, as a host overload or a VM
// pause does: they do not tick and messages to them wait, while the rest
// run on. Then each of them wakes at the same instant, ticks first (a
// driver whose timer fired during the stall may well handle it before
// its socket) and steps what waited, in the order it was sent.
func (tn *testNet) stall(d time.Duration, ids []protocols.ID) {
	frozen := make(map[protocols.ID]bool, len(ids))
	for _, id := range ids {
		frozen[id] = true
	}
	var held []protocols.Message
	drop := tn.Drop
	tn.Drop = func(m protocols.Message) bool {
		if frozen[m.To] && !tn.Crashed[m.To] {
			held = append(held, m)
			return true
		}
		return drop != nil && drop(m)
	}
	for end := tn.Now.Add(d); tn.Now < end; {
		tn.Now = tn.Now.Add(tn.Tick)
		for _, id := range tn.Live() {
			if !frozen[id] {
				tn.Nodes[id].Tick(tn.Now)
			}
		}
		tn.Deliver()
	}
	tn.Drop = drop
	for _, id := range ids {
		if !tn.Crashed[id] {
			tn.Nodes[id].Tick(tn.Now)
			tn.Drain(id)
		}
	}
	tn.Queue = append(tn.Queue, held...)
	tn.Deliver()
}
