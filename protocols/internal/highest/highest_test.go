package highest

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

func TestRosterVerdicts(t *testing.T) {
	r := NewRoster(2, []protocols.Member{{ID: 3, Name: "n3"}, {ID: 1, Name: "n1"}})
	if got := r.IDs(); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("ids %v, want [1 2 3] (self added, sorted)", got)
	}
	if !r.SetSuspected(3, true) || r.Live(3) || r.Down(3) {
		t.Fatal("a suspected member must be neither live nor down")
	}
	if !r.SetDown(1) || r.Live(1) || !r.Down(1) {
		t.Fatal("a member reported down must be down and not live")
	}
	if r.SetDown(2) || r.SetSuspected(2, true) || !r.Live(2) {
		t.Fatal("a node must not record verdicts on itself")
	}
	if r.SetDown(9) || r.Known(9) {
		t.Fatal("a verdict on an unknown id must add nothing")
	}
	if err := r.Up(protocols.Member{ID: 3}); err != nil || !r.Live(3) || r.Name(3) != "n3" {
		t.Fatalf("Up without a name: err %v, live %v, name %q (want live, name kept)", err, r.Live(3), r.Name(3))
	}
	if err := r.Up(protocols.Member{ID: MaxID + 1}); !errors.Is(err, ErrInvalidID) || r.Known(MaxID+1) {
		t.Fatalf("Up(MaxID+1) = %v, want ErrInvalidID and no member", err)
	}
	if s := r.Status(protocols.Follower, 3, 7); s.LeaderName != "n3" || s.Term != 7 || s.LeaseUntil != 0 {
		t.Fatalf("status %+v", s)
	}
}

func TestAbstention(t *testing.T) {
	const et = 100 * time.Millisecond
	var a Abstention
	end := a.Begin(0, et)
	if end != protocols.Time(0).Add(2*et) || !a.Active(end-1) || a.Active(end) {
		t.Fatalf("abstention ends at %v, want two election timeouts", end.Sub(0))
	}
	if !a.Spares(10, 1) {
		t.Fatal("an abstaining node must spare every leader")
	}
	a.Followed(10, true, 3) // the lower leader that replaced node 5
	if a.Active(11) || !a.Spares(1000, 3) || a.Spares(1000, 2) {
		t.Fatal("after following its successor a resigned node spares it, and only it")
	}
	a.Campaigning()
	if a.Spares(1000, 3) {
		t.Fatal("taking part in an election again ends the sparing")
	}
	a.Begin(0, et)
	a.Led()
	if a.Active(1) || a.Spares(1, 3) {
		t.Fatal("leading ends the abstention")
	}
}

func TestEpochsOnlyRise(t *testing.T) {
	e := NewEpochs(protocols.HardState{Term: 4, Epoch: 10})
	e.Observe(5)
	if e.Seen() != 10 || e.HardState().Epoch != 10 {
		t.Fatal("a lower epoch lowered what was seen")
	}
	e.Observe(12)
	if e.Seen() != 12 || e.HardState() != (protocols.HardState{Term: 4, Epoch: 12}) {
		t.Fatalf("hard state %+v, want epoch 12 and term kept", e.HardState())
	}
}

// TestRosterRanksByPriorityThenID: rank is (priority, id); priorities come
// with members, this node's own is set apart and MemberUp does not change
// it, and an unknown member has priority 0.
func TestRosterRanksByPriorityThenID(t *testing.T) {
	r := NewRoster(2, []protocols.Member{{ID: 1, Priority: 10}, {ID: 3}, {ID: 4, Priority: 10}})
	r.SetPriority(2, 5)
	for _, c := range []struct {
		a, b protocols.ID
		want bool
	}{
		{1, 3, true},  // priority beats id
		{4, 1, true},  // same priority: the higher id
		{1, 4, false}, //
		{2, 3, true},  // this node's own priority counts
		{3, 2, false}, //
		{9, 3, true},  // unknown: priority 0, then id
	} {
		if got := r.Above(c.a, c.b); got != c.want {
			t.Errorf("Above(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if h := r.Highest(protocols.None); h != 4 {
		t.Fatalf("highest-ranked other member %d, want 4", h)
	}
	if h := r.Highest(4); h != 1 {
		t.Fatalf("highest-ranked other member but 4: %d, want 1", h)
	}
	if err := r.Up(protocols.Member{ID: 2, Name: "self"}); err != nil || r.Priority(2) != 5 {
		t.Fatalf("MemberUp of this node changed its priority to %d (%v)", r.Priority(2), err)
	}
	if err := r.Up(protocols.Member{ID: 4, Name: "n4"}); err != nil || r.Priority(4) != 0 {
		t.Fatalf("a member back without a priority keeps %d, want 0 (%v)", r.Priority(4), err)
	}
	if !r.SetPriority(3, 20) || r.SetPriority(3, 20) || r.SetPriority(8, 1) {
		t.Fatal("SetPriority reports a change only for a known member whose priority differs")
	}
	if h := r.Highest(protocols.None); h != 3 {
		t.Fatalf("highest-ranked after 3 rose to 20: %d", h)
	}
}

func TestStability(t *testing.T) {
	s := NewStability(time.Second, 100)
	if s.Stable(protocols.Time(100).Add(time.Second)-1) || !s.Stable(protocols.Time(100).Add(time.Second)) {
		t.Fatal("stable exactly one delay after start")
	}
	s.Restart(protocols.Time(5e9))
	if s.Stable(protocols.Time(5e9)) || s.At() != protocols.Time(6e9) {
		t.Fatal("a restart starts the delay over")
	}
	if z := NewStability(0, 7); !z.Stable(7) {
		t.Fatal("no delay: stable at once")
	}
}
