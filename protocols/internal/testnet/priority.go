package testnet

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The priority properties bully and ring promise alike (docs/bully-ring.md):
// members rank by (priority, id), and a member of higher rank takes over
// from a live leader only once it has been up and eligible for the preempt
// delay, by a hand-over that leaves no moment without a leader. build makes
// a network of ids with the given priorities (every node knowing all of
// them) and preempt delay, and sets Net.Priorities.

// PrioBuilder builds a network for the priority checks.
type PrioBuilder[P Node] func(ids []protocols.ID, prio map[protocols.ID]uint8, delay time.Duration) *Net[P]

// CheckRankOrder: a priority beats a higher id; among equal priorities the
// higher id wins; losing leaders in turn walks down the ranks.
func CheckRankOrder[P Node](t *testing.T, build PrioBuilder[P]) {
	t.Helper()
	nw := build(Seq(4), map[protocols.ID]uint8{1: 10, 3: 5}, 0)
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(1)
	for _, next := range []protocols.ID{3, 4, 2} {
		nw.Crash(nw.Leaders()[0], true)
		nw.Advance(time.Second)
		nw.Agreed(next)
	}
}

// CheckPriorityTie: with equal priorities the higher id wins.
func CheckPriorityTie[P Node](t *testing.T, build PrioBuilder[P]) {
	t.Helper()
	nw := build(Seq(4), map[protocols.ID]uint8{1: 7, 2: 7}, 0)
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(2)
}

// noGap fails t when a live node other than except knows no leader, or
// none of them leads.
func noGap[P Node](t *testing.T, nw *Net[P], except protocols.ID, when string) {
	t.Helper()
	if len(nw.Leaders()) == 0 {
		t.Fatalf("%s: no node leads", when)
	}
	for _, id := range nw.Live() {
		if st := nw.Nodes[id].Status(nw.Now); id != except && st.Leader == protocols.None {
			t.Fatalf("%s: n%d knows no leader (%+v)", when, id, st)
		}
	}
}

// CheckPreemptAfterDelay: the preferred n1 leads; after its crash n4
// does; restarted, n1 follows n4 for its whole preempt delay (no
// preemption before), then takes over, in a new epoch, while every other
// node follows a leader at every step: the old leader leads until the
// hand-over reaches it.
func CheckPreemptAfterDelay[P Node](t *testing.T, build PrioBuilder[P]) {
	t.Helper()
	const delay = 500 * time.Millisecond
	nw := build(Seq(4), map[protocols.ID]uint8{1: 10}, delay)
	nw.Advance(time.Second)
	nw.Agreed(1)
	nw.Crash(1, true)
	nw.Advance(time.Second)
	e := nw.Agreed(4)
	nw.Restart(1)
	restarted := nw.Now
	for nw.Now.Sub(restarted) < delay-10*time.Millisecond {
		nw.Advance(10 * time.Millisecond)
		if nw.Nodes[1].Status(nw.Now).Role == protocols.Leader || !nw.AgreesOn(4) {
			t.Fatalf("%v after its restart, before its delay of %v, n1 took over or the others left n4:\n%s", nw.Now.Sub(restarted), delay, nw.Status())
		}
	}
	for !nw.AgreesOn(1) {
		if nw.Now.Sub(restarted) > delay+time.Second {
			t.Fatalf("n1 did not take over within a second after its delay:\n%s", nw.Status())
		}
		nw.Advance(time.Millisecond)
		noGap(t, nw, 1, "during the hand-over")
	}
	if e2 := nw.Agreed(1); e2 <= e {
		t.Fatalf("epoch %d after the hand-over, was %d", e2, e)
	}
}

// CheckFlappingPreferredNode: a preferred node that keeps restarting
// before its delay is over never takes over: n4 keeps leading, in the
// same epoch. Once it stays up past its delay it does take over.
func CheckFlappingPreferredNode[P Node](t *testing.T, build PrioBuilder[P]) {
	t.Helper()
	const delay = 500 * time.Millisecond
	nw := build(Seq(4), map[protocols.ID]uint8{1: 10}, delay)
	nw.Advance(time.Second)
	nw.Agreed(1)
	nw.Crash(1, true)
	nw.Advance(time.Second)
	e := nw.Agreed(4)
	for range 5 {
		nw.Restart(1)
		nw.Advance(delay - 100*time.Millisecond)
		nw.Crash(1, true)
		nw.Advance(100 * time.Millisecond)
		if got := nw.Agreed(4); got != e {
			t.Fatalf("the flapping n1 moved leadership: epoch %d, was %d", got, e)
		}
	}
	nw.Restart(1)
	nw.Advance(delay + 500*time.Millisecond)
	nw.Agreed(1)
}

// CheckEligibleAgainWaitsForDelay: the preferred leader turned ineligible
// hands over; eligible again, it takes leadership back only after its
// delay, counted from when it turned eligible.
func CheckEligibleAgainWaitsForDelay[P Node](t *testing.T, build PrioBuilder[P]) {
	t.Helper()
	const delay = 500 * time.Millisecond
	nw := build(Seq(3), map[protocols.ID]uint8{1: 10}, delay)
	nw.Advance(time.Second)
	nw.Agreed(1)
	setCandidacy(t, nw, 1, protocols.Candidacy{Ineligible: true, Priority: 10})
	nw.Advance(time.Second)
	nw.Agreed(3)
	setCandidacy(t, nw, 1, protocols.Candidacy{Priority: 10})
	back := nw.Now
	for nw.Now.Sub(back) < delay-10*time.Millisecond {
		nw.Advance(10 * time.Millisecond)
		if !nw.AgreesOn(3) {
			t.Fatalf("%v after turning eligible, before its delay, n1 took over:\n%s", nw.Now.Sub(back), nw.Status())
		}
	}
	nw.Advance(delay)
	nw.Agreed(1)
}
