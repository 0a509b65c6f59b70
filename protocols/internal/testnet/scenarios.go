package testnet

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// DeadlineScenario runs nw (five nodes ticking every millisecond) through
// random faults — isolation, heal, partition, crash with and without a
// MemberDown, restart, resign, suspicion and its retraction, and with loss
// lost election messages (so rounds stall) — and returns the trace of every
// message and leadership change. Run once eagerly and once with Lazy set,
// the two traces must match: a tick NextDeadline let the driver skip must
// have been one that would have done nothing.
func DeadlineScenario[P Node](nw *Net[P], seed uint64, loss bool) string {
	nw.TraceSends = true
	rng := rand.New(rand.NewPCG(seed, 99))
	lossRng := rand.New(rand.NewPCG(seed, 7))
	faults := 8
	if loss {
		faults = 9
	}
	nw.Advance(300 * time.Millisecond)
	for range 30 {
		id := protocols.ID(1 + rng.IntN(5))
		other := protocols.ID(1 + rng.IntN(5))
		switch rng.IntN(faults) {
		case 0:
			nw.Isolate(id)
		case 1:
			nw.Heal()
			nw.Drop = nil
		case 2:
			nw.Partition([]protocols.ID{1, 2}, []protocols.ID{3, 4, 5})
		case 3:
			if !nw.Crashed[id] {
				nw.Crash(id, rng.IntN(2) == 0)
			}
		case 4:
			if nw.Crashed[id] {
				nw.Restart(id)
			}
		case 5:
			for _, l := range nw.Leaders() {
				_ = nw.Nodes[l].Resign(nw.Now)
			}
		case 6, 7:
			if !nw.Crashed[id] && id != other {
				nw.Nodes[id].Suspect(nw.Now, other, rng.IntN(3) != 0)
			}
		case 8:
			nw.Drop = func(m protocols.Message) bool {
				return m.Kind != protocols.MsgHeartbeat && lossRng.IntN(4) == 0
			}
		}
		nw.Deliver()
		nw.Advance(time.Duration(1+rng.IntN(400)) * time.Millisecond)
	}
	nw.Heal()
	nw.Drop = nil
	nw.Advance(2 * time.Second)
	return nw.TakeEvents()
}

// CheckSkipsOnlyIdleTicks runs DeadlineScenario twice per seed and
// variant: once ticking every node every millisecond, once ticking a node
// only when its NextDeadline is due (how the agent sleeps). Every message
// and leadership change must match: a tick the deadline let the driver
// skip must have been one that would have done nothing. build makes the
// five-node network of a variant.
func CheckSkipsOnlyIdleTicks[P Node](t *testing.T, seeds uint64, variants []string, loss bool, build func(variant string) *Net[P]) {
	t.Helper()
	for _, v := range variants {
		for seed := uint64(1); seed <= seeds; seed++ {
			run := func(lazy bool) string {
				nw := build(v)
				nw.Lazy = lazy
				return DeadlineScenario(nw, seed, loss)
			}
			eager, lazy := run(false), run(true)
			if eager != lazy {
				t.Fatalf("%s seed %d: ticking only at NextDeadline changed the run\n--- every tick:\n%s\n--- at deadlines:\n%s",
					v, seed, eager, lazy)
			}
			if !strings.Contains(eager, " leader leader=") {
				t.Fatalf("%s seed %d: no leader was ever elected: the comparison compared nothing", v, seed)
			}
		}
	}
}

// CheckNeverStaleAfterTick checks that a node ticked at time now re-arms
// into the future, so a driver that sleeps until the deadline cannot spin:
// nw (four nodes ticking every millisecond) runs through an isolation, a
// heal and a crash.
func CheckNeverStaleAfterTick[P Node](t testing.TB, nw *Net[P]) {
	t.Helper()
	for step := range 3000 {
		switch step {
		case 500:
			nw.Isolate(4)
		case 900:
			nw.Heal()
		case 1500:
			nw.Crash(4, false)
		}
		nw.Advance(time.Millisecond)
		for _, id := range nw.Live() {
			n := nw.Nodes[id]
			n.Tick(nw.Now)
			if d, ok := n.NextDeadline(nw.Now); !ok || d <= nw.Now {
				t.Fatalf("step %d n%d: deadline %v (armed %v) still due after Tick at %v", step, id, d.Sub(0), ok, nw.Now.Sub(0))
			}
		}
		nw.Deliver()
	}
}

// Campaigner is a protocol that can be made to start an election at once.
type Campaigner interface {
	Node
	Campaign(now protocols.Time)
}

// CheckCeiling checks that a node whose next epoch would pass
// protocols.Ceiling does not take the lead (it would wrap) and says why in
// its log, and that an absurd epoch is refused without a trace. build makes
// node 1 of members n1 and n2 from hs, logging to log; announce is the
// protocol's leader announcement from node 2 to node 1.
func CheckCeiling[P Campaigner](t testing.TB, build func(hs protocols.HardState, log protocols.Logger) (P, error), announce protocols.Message) {
	t.Helper()
	last := protocols.Ceiling >> protocols.EpochIDBits << protocols.EpochIDBits
	var log LineLog
	n, err := build(protocols.HardState{Epoch: last}, &log)
	if err != nil {
		t.Fatal(err)
	}
	n.MemberDown(0, 2) // alone: it would lead at once
	n.Campaign(0)
	for n.HasReady() {
		rd := n.Ready()
		if rd.HardState != nil && rd.HardState.Epoch > protocols.Ceiling {
			t.Fatalf("persisted epoch %d beyond the ceiling", rd.HardState.Epoch)
		}
		n.Advance(rd)
	}
	if st := n.Status(0); st.Role == protocols.Leader || st.Epoch > protocols.Ceiling {
		t.Fatalf("status %+v: led or passed the ceiling", st)
	}
	if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "at the ceiling") }) {
		t.Fatalf("the node did not say why it does not lead: %q", log)
	}
	announce.Epoch = math.MaxUint64 - 1
	if err := n.Step(0, announce); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("Step(absurd epoch) = %v, want ErrBeyondCeiling", err)
	}
	if _, err := build(protocols.HardState{Epoch: math.MaxUint64 - 1}, nil); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("New from an absurd epoch = %v, want ErrBeyondCeiling", err)
	}
}

// LineLog records a protocol's log messages.
type LineLog []string

// Debugw records msg.
func (l *LineLog) Debugw(msg string, _ ...any) { *l = append(*l, msg) }

// Infow records msg.
func (l *LineLog) Infow(msg string, _ ...any) { *l = append(*l, msg) }
