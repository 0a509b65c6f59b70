package protocols

import (
	"strings"
	"testing"
)

func TestNextEpochNeverShared(t *testing.T) {
	a, b := NextEpoch(0, 1), NextEpoch(0, 2)
	if a == b || EpochLeader(a) != 1 || EpochLeader(b) != 2 {
		t.Fatalf("NextEpoch(0, 1..2) = %d, %d", a, b)
	}
	if c := NextEpoch(b, 1); c <= b || EpochLeader(c) != 1 {
		t.Fatalf("NextEpoch(%d, 1) = %d: must grow and name its leader", b, c)
	}
}

func TestCheckEpochIDsReportsEveryProblem(t *testing.T) {
	if errs := CheckEpochIDs(1, []Member{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}}); len(errs) != 0 {
		t.Fatalf("valid ids refused: %v", errs)
	}
	errs := CheckEpochIDs(MaxEpochID+1, []Member{{ID: 0, Name: "z"}, {ID: 3, Name: "c"}, {ID: 3, Name: "d"}})
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	got := strings.Join(all, "; ")
	for _, want := range []string{"id 1048576 must be between", `member "z": id 0`, "member id 3 appears twice"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not mention %q", got, want)
		}
	}
}
