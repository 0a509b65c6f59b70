package testnet

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The properties bully and ring promise alike, as highest-id elections;
// build makes a network of the given ids.

// CheckResign: Resign on a follower is refused; on the leader (the highest
// id) it hands over to the next highest, in a higher epoch, which the
// resigned node then leaves be; it wins the next election again.
func CheckResign[P Node](t *testing.T, build func(ids []protocols.ID) *Net[P]) {
	t.Helper()
	nw := build(Seq(4))
	nw.Advance(500 * time.Millisecond)
	e1 := nw.Agreed(4)
	if err := nw.Nodes[3].Resign(nw.Now); !errors.Is(err, protocols.ErrNotLeader) {
		t.Fatalf("Resign on follower: %v", err)
	}
	if err := nw.Nodes[4].Resign(nw.Now); err != nil {
		t.Fatal(err)
	}
	nw.Deliver()
	if e2 := nw.Agreed(3); e2 <= e1 {
		t.Fatalf("epoch %d after resign, was %d", e2, e1)
	}
	nw.Advance(time.Second)
	nw.Agreed(3) // 4 does not take it back
	nw.Crash(3, true)
	nw.Advance(time.Second)
	nw.Agreed(4) // but wins the next election
}

// CheckResignAlone: a leader with nobody to hand over to refuses, and
// stays leader.
func CheckResignAlone[P Node](t *testing.T, build func(ids []protocols.ID) *Net[P]) {
	t.Helper()
	nw := build(Seq(2))
	nw.Advance(500 * time.Millisecond)
	nw.Crash(1, true)
	if err := nw.Nodes[2].Resign(nw.Now); !errors.Is(err, protocols.ErrNoTransferTarget) {
		t.Fatalf("Resign alone: %v", err)
	}
	if nw.Nodes[2].Status(nw.Now).Role != protocols.Leader {
		t.Fatal("failed Resign changed the role")
	}
}

// CheckEpochSurvivesRestart: after every node restarts from its durable
// state, the next leader's epoch exceeds the last one's.
func CheckEpochSurvivesRestart[P Node](t *testing.T, build func(ids []protocols.ID) *Net[P]) {
	t.Helper()
	nw := build(Seq(3))
	nw.Advance(500 * time.Millisecond)
	e1 := nw.Agreed(3)
	for _, id := range nw.IDs {
		nw.Crash(id, false)
	}
	for _, id := range nw.IDs {
		nw.Restart(id)
	}
	nw.Advance(time.Second)
	if e2 := nw.Agreed(3); e2 <= e1 {
		t.Fatalf("epoch after full restart %d, before %d", e2, e1)
	}
}

// setCandidacy gives node id of nw candidacy c (protocols.CandidacySetter).
func setCandidacy[P Node](t *testing.T, nw *Net[P], id protocols.ID, c protocols.Candidacy) {
	t.Helper()
	cs, ok := any(nw.Nodes[id]).(protocols.CandidacySetter)
	if !ok {
		t.Fatalf("node %d does not take a candidacy", id)
	}
	cs.SetCandidacy(nw.Now, c)
	nw.Drain(id)
}

// CheckIneligibleNeverLeads: the highest id turned ineligible hands over,
// is never given leadership while ineligible (it abstains: it answers or
// relays, competes with no one, preempts no lower leader), follows the new
// leader, and once eligible again — and stable for its preempt delay, zero
// here — takes leadership back as the member of highest rank
// (docs/bully-ring.md).
func CheckIneligibleNeverLeads[P Node](t *testing.T, build func(ids []protocols.ID) *Net[P]) {
	t.Helper()
	nw := build(Seq(3))
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(3)
	setCandidacy(t, nw, 3, protocols.Candidacy{Ineligible: true})
	for range 40 { // 2 s: many election timeouts
		nw.Advance(50 * time.Millisecond)
		if nw.Nodes[3].Status(nw.Now).Role == protocols.Leader {
			t.Fatal("the ineligible node leads")
		}
	}
	e := nw.Agreed(2)
	setCandidacy(t, nw, 3, protocols.Candidacy{})
	nw.Advance(time.Second)
	if nw.Agreed(3) <= e {
		t.Fatal("the epoch did not rise with the takeover")
	}
}

// CheckIneligibleAloneKeepsLeading: with no other live member to hand over
// to, an ineligible leader keeps leading (docs/health.md), and hands over
// once a member is back.
func CheckIneligibleAloneKeepsLeading[P Node](t *testing.T, build func(ids []protocols.ID) *Net[P]) {
	t.Helper()
	nw := build(Seq(2))
	nw.Advance(500 * time.Millisecond)
	nw.Agreed(2)
	nw.Crash(1, true)
	setCandidacy(t, nw, 2, protocols.Candidacy{Ineligible: true})
	nw.Advance(500 * time.Millisecond)
	if nw.Nodes[2].Status(nw.Now).Role != protocols.Leader {
		t.Fatal("an ineligible leader alone stopped leading")
	}
	nw.Restart(1)
	nw.Advance(2 * time.Second)
	nw.Agreed(1)
}
