package protocols

import (
	"errors"
	"math"
	"testing"
)

func TestAdmitTerm(t *testing.T) {
	cases := []struct {
		v, own uint64
		want   bool
	}{
		{0, 0, true},
		{MaxAccepted, 0, true},             // a fresh node joins a cluster pushed to the limit
		{MaxAccepted + TermSlack, 0, true}, // and one that has elected past it for a while
		{MaxAccepted + TermSlack + 1, 0, false},
		{MaxAccepted + 3*TermSlack, MaxAccepted + 2*TermSlack, true},
		{MaxAccepted + 3*TermSlack + 1, MaxAccepted + 2*TermSlack, false},
		{Ceiling, Ceiling - 1, true},
		{Ceiling + 1, Ceiling, false},  // never past the ceiling, even one step
		{math.MaxUint64 - 1, 0, false}, // the value of the issue
		{math.MaxUint64, math.MaxUint64 - 1, false},
		{3, Ceiling, true}, // lower than our own: the protocol decides (stale)
	}
	for _, c := range cases {
		if got := AdmitTerm(c.v, c.own); got != c.want {
			t.Errorf("AdmitTerm(%d, %d) = %v, want %v", c.v, c.own, got, c.want)
		}
	}
}

func TestAdmitEpochCountsRounds(t *testing.T) {
	own := NextEpoch(MaxAccepted, 7)
	if !AdmitEpoch(NextEpoch(own, MaxEpochID), own) {
		t.Error("the next round above MaxAccepted is refused")
	}
	far := (own>>EpochIDBits + TermSlack + 2) << EpochIDBits
	if AdmitEpoch(far, own) {
		t.Errorf("epoch %d, more than TermSlack rounds above %d, admitted", far, own)
	}
	if AdmitEpoch(math.MaxUint64-1, 0) {
		t.Error("2^64-2 admitted")
	}
}

func TestNothingWrapsAtTheCeiling(t *testing.T) {
	if !CanRaiseTerm(Ceiling-1) || CanRaiseTerm(Ceiling) {
		t.Error("CanRaiseTerm must allow Ceiling and nothing above")
	}
	// The largest seen epoch from which an election stays within Ceiling.
	last := (Ceiling>>EpochIDBits - 1) << EpochIDBits
	if !CanCreateEpoch(last) {
		t.Fatalf("CanCreateEpoch(%d) = false", last)
	}
	if e := NextEpoch(last, MaxEpochID); e > Ceiling || e <= last {
		t.Errorf("NextEpoch(%d, max id) = %d, outside (%d, %d]", last, e, last, Ceiling)
	}
	if CanCreateEpoch(last + 1<<EpochIDBits) {
		t.Error("an epoch beyond the ceiling could be created")
	}
	// Every admitted value leaves room to elect: nothing admitted is a
	// term or epoch from which the next election wraps.
	for _, v := range []uint64{MaxAccepted, MaxAccepted + TermSlack} {
		if !CanRaiseTerm(v) || !CanCreateEpoch(v) {
			t.Errorf("no room to elect after admitting %d", v)
		}
	}
}

func TestCheckHardState(t *testing.T) {
	if err := CheckHardState(HardState{Term: Ceiling, Epoch: Ceiling}); err != nil {
		t.Errorf("state at the ceiling refused: %v", err)
	}
	for _, hs := range []HardState{{Term: math.MaxUint64 - 1}, {Epoch: math.MaxUint64 - 1}, {Term: Ceiling + 1}} {
		if err := CheckHardState(hs); !errors.Is(err, ErrBeyondCeiling) {
			t.Errorf("CheckHardState(%+v) = %v, want ErrBeyondCeiling", hs, err)
		}
	}
}
