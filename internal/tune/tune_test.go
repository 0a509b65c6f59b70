package tune

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

func defaults() Settings {
	return Settings{Protocol: "majority", HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		Threshold: 10, MinStdDev: 25 * time.Millisecond, AcceptablePause: 100 * time.Millisecond}
}

// TestQuietLANKeepsTheDefaults: gaps that never pass 90 ms need nothing
// changed.
func TestQuietLANKeepsTheDefaults(t *testing.T) {
	g := []Gaps{{"n2", api.HeartbeatStats{Samples: 100000, P50Ms: 50, P99Ms: 55, P999Ms: 70, MaxGapMs: 90}}}
	rep, err := Recommend(defaults(), g, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended.Settings != defaults() {
		t.Errorf("recommended %+v for a quiet LAN, want the defaults", rep.Recommended.Settings)
	}
	if rep.Current.ElectionFalsePerDay > 1 || rep.Current.TailFalsePerDay > 1 {
		t.Errorf("quiet LAN judged noisy: %+v", rep.Current)
	}
	if rep.Current.Failover != 400*time.Millisecond {
		t.Errorf("majority failover %v, want 2 election timeouts", rep.Current.Failover)
	}
}

// TestPausesRaiseTheTimings: a member whose gaps reach 400 ms at p99.9
// starts needless elections under a 200 ms timeout; the recommendation
// raises the timeout past its tail and predicts within the target.
func TestPausesRaiseTheTimings(t *testing.T) {
	g := []Gaps{
		{"quiet", api.HeartbeatStats{Samples: 100000, P50Ms: 50, P99Ms: 55, P999Ms: 70, MaxGapMs: 90}},
		{"paused", api.HeartbeatStats{Samples: 100000, P50Ms: 50, P99Ms: 150, P999Ms: 400, MaxGapMs: 900}},
	}
	rep, err := Recommend(defaults(), g, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Worst.Member != "paused" {
		t.Errorf("worst member %q, want paused", rep.Worst.Member)
	}
	if rep.Current.ElectionFalsePerDay <= 1 {
		t.Errorf("a 200ms timeout under 400ms p99.9 gaps predicts %.3g elections a day; want more than 1", rep.Current.ElectionFalsePerDay)
	}
	r := rep.Recommended
	if r.Settings.ElectionTimeout <= 400*time.Millisecond || r.ElectionFalsePerDay > 1 || r.TailFalsePerDay > 1 {
		t.Errorf("recommended %+v: want a timeout above 400ms and at most 1 false alarm a day", r)
	}
	if r.Failover <= rep.Current.Failover {
		t.Errorf("a longer timeout must cost failover time: %v then %v", rep.Current.Failover, r.Failover)
	}
}

// TestTooFewSamples: p99.9 of a few hundred gaps is a guess, so tune says
// to wait instead of guessing.
func TestTooFewSamples(t *testing.T) {
	g := []Gaps{{"n2", api.HeartbeatStats{Samples: 300, P50Ms: 50, P99Ms: 55, P999Ms: 70, MaxGapMs: 90}}}
	if _, err := Recommend(defaults(), g, 1); err == nil {
		t.Fatal("no error with 300 samples")
	}
}

// TestTailShare: the interpolated tail passes through the measured
// points and falls beyond the longest gap.
func TestTailShare(t *testing.T) {
	st := api.HeartbeatStats{Samples: 10000, P50Ms: 50, P99Ms: 100, P999Ms: 200, MaxGapMs: 400}
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{{50 * time.Millisecond, 0.5}, {100 * time.Millisecond, 0.01}, {200 * time.Millisecond, 0.001}, {400 * time.Millisecond, 0.0001}} {
		if got := tailShare(st, tc.d); got < tc.want*0.99 || got > tc.want*1.01 {
			t.Errorf("share above %v = %g, want %g", tc.d, got, tc.want)
		}
	}
	if tailShare(st, 800*time.Millisecond) >= 0.0001 {
		t.Error("the tail does not fall beyond the longest gap")
	}
}
