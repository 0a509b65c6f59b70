package phi

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// suspectAtBisect is SuspectAt as a plain bisection over the elapsed
// time: the reference the fast path must match to the nanosecond, since
// the simulator replays schedules whose wake-ups come from it.
func (d *Detector) suspectAtBisect() (protocols.Time, bool) {
	if !d.heard {
		return 0, false
	}
	at := func(e int64) bool { return phiOfZ((float64(e)-d.mean)/d.std) >= d.cfg.Threshold }
	if at(0) {
		return d.last, true
	}
	lo, hi := int64(0), int64(d.mean+1500*d.std)
	for hi < math.MaxInt64/2 && !at(hi) {
		hi *= 2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if at(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return d.suspectAfter(hi)
}

// SuspectAt's guess from the threshold's crossing z gives the same
// nanosecond as a bisection, over detectors of random thresholds, pauses,
// deviations and heartbeat histories.
func TestSuspectAtMatchesBisection(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 20000 {
		c := DefaultConfig()
		c.Threshold = 0.5 + rng.Float64()*30
		c.MinStdDev = time.Duration(1+rng.IntN(200)) * time.Millisecond
		c.AcceptablePause = time.Duration(rng.IntN(2000)) * time.Millisecond
		c.FirstHeartbeatEstimate = time.Duration(10+rng.IntN(2000)) * time.Millisecond
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		now := protocols.Time(rng.Int64N(int64(time.Hour)))
		for range rng.IntN(40) {
			now += protocols.Time(time.Duration(1+rng.IntN(400)) * time.Millisecond)
			d.Heartbeat(now)
		}
		got, ok := d.SuspectAt()
		want, wantOK := d.suspectAtBisect()
		if got != want || ok != wantOK {
			t.Fatalf("case %d (threshold %v, mean %v, std %v): SuspectAt = %v %v, bisection %v %v", i, c.Threshold, d.mean, d.std, got, ok, want, wantOK)
		}
	}
}
