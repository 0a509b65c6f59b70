package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
)

// TestArrivalQuantiles: percentiles come out at 10 % resolution, never
// below the true value, and the longest gap exactly.
func TestArrivalQuantiles(t *testing.T) {
	var a arrivals
	for i := 0; i < 990; i++ {
		a.add(50 * time.Millisecond)
	}
	for i := 0; i < 9; i++ {
		a.add(200 * time.Millisecond)
	}
	a.add(3 * time.Second)
	for _, tc := range []struct {
		q      float64
		lo, hi time.Duration
	}{
		{0.5, 50 * time.Millisecond, 55 * time.Millisecond},
		{0.99, 50 * time.Millisecond, 55 * time.Millisecond},
		{0.999, 200 * time.Millisecond, 220 * time.Millisecond},
		{1, 3 * time.Second, 3 * time.Second},
	} {
		if got := a.quantile(tc.q); got < tc.lo || got > tc.hi {
			t.Errorf("quantile %v = %v, want in [%v, %v]", tc.q, got, tc.lo, tc.hi)
		}
	}
	if a.max != 3*time.Second {
		t.Errorf("max %v, want 3s", a.max)
	}
	if got := a.exceeding(100 * time.Millisecond); got < 0.009 || got > 0.011 {
		t.Errorf("share above 100ms %v, want 0.01", got)
	}
}

// TestArrivalsCountOnlyWatchedGaps: the time a member spent down is not a
// gap: after it comes back, the first heartbeat starts a new watch.
func TestArrivalsCountOnlyWatchedGaps(t *testing.T) {
	tn, _ := newTestNode(t, ProtocolBully)
	tn.applyMember(member("a", 2, membership.StateAlive))
	for i := 0; i < 5; i++ {
		tn.heard(2)
		tn.now = tn.now.Add(100 * time.Millisecond)
	}
	st := tn.heartbeatStats(2)
	if st == nil || st.Samples != 4 || st.MaxGapMs != 100 {
		t.Fatalf("after 5 heartbeats 100ms apart: %+v, want 4 samples, max 100ms", st)
	}
	tn.applyMember(member("a", 2, membership.StateDead))
	tn.now = tn.now.Add(time.Minute)
	tn.applyMember(member("a", 2, membership.StateAlive))
	tn.heard(2)
	tn.now = tn.now.Add(100 * time.Millisecond)
	tn.heard(2)
	if st := tn.heartbeatStats(2); st == nil || st.MaxGapMs > 100 {
		t.Fatalf("a minute down counted as a gap: %+v", st)
	}
}
