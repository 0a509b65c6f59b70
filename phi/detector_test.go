package phi

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

const ms = protocols.Time(time.Millisecond)

func mustNew(t testing.TB, c Config) *Detector {
	t.Helper()
	d, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// feed sends heartbeats separated by gaps, starting at start, and returns
// the last arrival time.
func feed(d *Detector, start protocols.Time, gaps ...protocols.Time) protocols.Time {
	now := start
	d.Heartbeat(now)
	for _, g := range gaps {
		now += g
		d.Heartbeat(now)
	}
	return now
}

func bareConfig() Config {
	return Config{
		Threshold:              8,
		MaxSamples:             10,
		MinStdDev:              time.Millisecond,
		FirstHeartbeatEstimate: 100 * time.Millisecond,
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.FirstHeartbeatEstimate != DefaultHeartbeatInterval {
		t.Errorf("FirstHeartbeatEstimate %v, want DefaultHeartbeatInterval %v", c.FirstHeartbeatEstimate, DefaultHeartbeatInterval)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{Threshold: math.NaN(), MaxSamples: 1, MinStdDev: 0, AcceptablePause: -1, FirstHeartbeatEstimate: MaxDuration + 1}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, key := range []string{"threshold", "max_samples", "min_std_dev", "acceptable_pause", "heartbeat_interval"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted the zero Config")
	}
}

// The detector's phi must be the normal tail at z = (elapsed - mean)/std of
// its window. Gaps alternating 80 and 120 ms have mean 100 ms and
// (population) deviation exactly 20 ms, so the silence 100 + 20k ms must
// give the tail at z = k.
func TestPhiMatchesFormulaAtKnownPoints(t *testing.T) {
	d := mustNew(t, bareConfig())
	var gaps []protocols.Time
	for i := 0; i < 20; i++ { // evicts the two prior samples
		gaps = append(gaps, 80*ms, 120*ms)
	}
	last := feed(d, 5*ms, gaps...)
	if d.Mean() != 100*time.Millisecond || d.StdDev() != 20*time.Millisecond || d.Samples() != 10 {
		t.Fatalf("window: mean %v std %v samples %d, want 100ms 20ms 10", d.Mean(), d.StdDev(), d.Samples())
	}
	for _, p := range tailPoints {
		if p.z < -5 || p.z > 40 || p.z != math.Trunc(p.z) {
			continue // silence must be a whole number of ms and >= 0
		}
		now := last + 100*ms + protocols.Time(p.z)*20*ms
		if got := d.Phi(now); math.Abs(got-p.phi)/p.phi > 1e-12 {
			t.Errorf("Phi at z=%v: %.17g, want %.17g", p.z, got, p.phi)
		}
	}
	// phi 8 is crossed at z = 5.612: 100 + 112.24 ms.
	if d.Suspect(last+212*ms) || !d.Suspect(last+213*ms) {
		t.Errorf("threshold 8 not crossed between 212 and 213 ms: phi %v, %v", d.Phi(last+212*ms), d.Phi(last+213*ms))
	}
}

func TestFirstHeartbeatEstimate(t *testing.T) {
	c := bareConfig()
	d := mustNew(t, c)
	if got := d.Phi(1e12); got != 0 {
		t.Errorf("phi before any heartbeat = %v, want 0", got)
	}
	if _, ok := d.SuspectAt(); ok {
		t.Error("SuspectAt ok before any heartbeat")
	}
	d.Heartbeat(7 * ms)
	// Prior: mean 100 ms, deviation 25 ms.
	if d.Mean() != 100*time.Millisecond || d.StdDev() != 25*time.Millisecond {
		t.Fatalf("prior mean %v std %v, want 100ms 25ms", d.Mean(), d.StdDev())
	}
	if got, want := d.Phi(7*ms+150*ms), phiOfZ(2); math.Abs(got-want) > 1e-12 {
		t.Errorf("phi two deviations past the estimate = %v, want %v", got, want)
	}
	// Reset returns to exactly this state.
	feed(d, 10*ms, 300*ms, 10*ms, 900*ms)
	d.Reset()
	if d.Phi(1e12) != 0 || d.Samples() != 2 {
		t.Fatalf("after Reset: phi %v samples %d", d.Phi(1e12), d.Samples())
	}
	d.Heartbeat(7 * ms)
	if d.Mean() != 100*time.Millisecond || d.StdDev() != 25*time.Millisecond {
		t.Errorf("after Reset: mean %v std %v, want 100ms 25ms", d.Mean(), d.StdDev())
	}
}

func TestAcceptablePauseShiftsTheCurve(t *testing.T) {
	const pause = 300 * time.Millisecond
	plain, paused := bareConfig(), bareConfig()
	paused.AcceptablePause = pause
	a, b := mustNew(t, plain), mustNew(t, paused)
	gaps := []protocols.Time{90 * ms, 110 * ms, 95 * ms, 105 * ms, 100 * ms, 92 * ms, 108 * ms, 99 * ms, 101 * ms, 97 * ms, 103 * ms}
	last := feed(a, 0, gaps...)
	feed(b, 0, gaps...)
	if b.Mean()-a.Mean() != pause || a.StdDev() != b.StdDev() {
		t.Fatalf("pause moved mean %v→%v, std %v→%v", a.Mean(), b.Mean(), a.StdDev(), b.StdDev())
	}
	for e := protocols.Time(0); e < 2000*ms; e += 7 * ms {
		if got, want := b.Phi(last+e+protocols.Time(pause)), a.Phi(last+e); got != want {
			t.Fatalf("phi with pause at %v+pause = %v, without at %v = %v", e, got, e, want)
		}
	}
	// So the same silence is far less suspicious with the pause allowed.
	at := last + 250*ms
	if !a.Suspect(at) || b.Suspect(at) {
		t.Errorf("250 ms silence: plain phi %v (want suspect), paused phi %v (want not)", a.Phi(at), b.Phi(at))
	}
}

// When the jitter grows, the window learns it: a silence that was damning
// on a quiet network becomes unremarkable once the network is noisy, and
// the memory of the quiet network fades as its samples leave the window.
func TestAdaptsWhenJitterGrows(t *testing.T) {
	c := bareConfig()
	c.MaxSamples = 100
	d := mustNew(t, c)
	rng := rand.New(rand.NewPCG(1, 2))
	now := protocols.Time(0)
	d.Heartbeat(now)
	beat := func(jitter float64) {
		now += protocols.Time(100*float64(ms) + rng.NormFloat64()*jitter*float64(ms))
		d.Heartbeat(now)
	}
	for i := 0; i < 200; i++ {
		beat(2)
	}
	quietStd := d.StdDev()
	if d.Phi(now+250*ms) < 100 {
		t.Fatalf("quiet network (std %v): phi after 250 ms = %v, want very high", quietStd, d.Phi(now+250*ms))
	}
	for i := 0; i < 200; i++ {
		beat(40)
	}
	noisyStd := d.StdDev()
	if noisyStd < 30*time.Millisecond || noisyStd > 50*time.Millisecond {
		t.Errorf("noisy network: std %v, want about 40ms", noisyStd)
	}
	if got := d.Phi(now + 250*ms); got >= c.Threshold {
		t.Errorf("noisy network (std %v): phi after 250 ms = %v, want below threshold %v", noisyStd, got, c.Threshold)
	}
	// And back: once the window holds only quiet samples again, the
	// deviation is as small as before.
	for i := 0; i < 100; i++ {
		beat(2)
	}
	if got := d.StdDev(); got > 2*quietStd {
		t.Errorf("after returning to quiet: std %v, quiet was %v", got, quietStd)
	}
}

func TestExtremes(t *testing.T) {
	c := bareConfig()
	c.MinStdDev = 1 // one nanosecond: the smallest allowed floor
	d := mustNew(t, c)
	// Perfectly regular heartbeats: the measured deviation is 0, so
	// only the 1 ns floor stands between phi and a division by zero.
	last := feed(d, 0, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms, 100*ms)
	if d.StdDev() != 1 {
		t.Fatalf("std %v, want the 1ns floor", d.StdDev())
	}
	prev := -1.0
	for _, e := range []protocols.Time{0, 100*ms - 1, 100 * ms, 100*ms + 1, 100*ms + 1000, 101 * ms, protocols.Time(time.Hour), math.MaxInt64 - last} {
		p := d.Phi(last + e)
		if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || p < prev {
			t.Fatalf("regular heartbeats, silence %v: phi %v (previous %v)", time.Duration(e), p, prev)
		}
		prev = p
	}
	if prev < 1e30 {
		t.Errorf("phi after the longest silence = %v, want astronomically large", prev)
	}
	// A clock reading before the last heartbeat counts as no silence.
	if got, want := d.Phi(last-protocols.Time(time.Hour)), d.Phi(last); got != want {
		t.Errorf("phi before last heartbeat %v, at it %v", got, want)
	}
	// A gap longer than MaxDuration is recorded as MaxDuration and the
	// sums stay exact: mean of ten MaxDuration gaps is MaxDuration.
	big := protocols.Time(MaxDuration)
	feed(d, last+10*big, 3*big, 3*big, 3*big, 3*big, 3*big, 3*big, 3*big, 3*big, 3*big, 3*big)
	if d.Mean() != MaxDuration || d.StdDev() != 1 {
		t.Errorf("after huge gaps: mean %v std %v, want %v and 1ns", d.Mean(), d.StdDev(), MaxDuration)
	}
	// A heartbeat stamped earlier than the last records a zero gap and
	// leaves the detector's time where it was.
	l0, _ := d.Last()
	d.Heartbeat(l0 - 5)
	if l1, _ := d.Last(); l1 != l0 {
		t.Errorf("Last moved back from %v to %v", l0, l1)
	}
}

// Over a long run the running sums must equal a fresh computation over the
// window: integer sums cannot drift, and this checks the eviction
// arithmetic (including 128-bit borrows) never slips.
func TestLongRunMatchesDirectComputation(t *testing.T) {
	c := bareConfig()
	c.MaxSamples = 97
	d := mustNew(t, c)
	rng := rand.New(rand.NewPCG(3, 4))
	now := protocols.Time(0)
	d.Heartbeat(now)
	window := make([]float64, 0, 2_000_000)
	for i := 0; i < 2_000_000; i++ {
		var g protocols.Time
		switch rng.IntN(200) {
		case 0:
			// A huge gap now and then: its square overflows 64 bits,
			// exercising the carries and borrows of the 128-bit sum.
			g = protocols.Time(MaxDuration) - protocols.Time(rng.Int64N(1<<39))
		case 1:
			g = 0
		default:
			g = protocols.Time(float64(100*ms) * (1 + 0.3*rng.NormFloat64()))
			g = max(g, 0)
		}
		now += g
		d.Heartbeat(now)
		window = append(window, float64(g))
		// Compare often enough to catch windows with huge gaps in them.
		if i%9973 == 0 || i == 2_000_000-1 {
			checkWindow(t, d, window[max(0, len(window)-c.MaxSamples):])
		}
	}
}

func checkWindow(t *testing.T, d *Detector, w []float64) {
	t.Helper()
	if len(w) < d.cfg.MaxSamples {
		return // the prior samples are still in the window
	}
	var mean, m2 float64
	for _, x := range w {
		mean += x
	}
	mean /= float64(len(w))
	for _, x := range w {
		m2 += (x - mean) * (x - mean)
	}
	std := math.Sqrt(m2 / float64(len(w)))
	if got := float64(d.Mean()); math.Abs(got-mean) > 1+1e-12*mean {
		t.Fatalf("mean %v, direct %v", got, mean)
	}
	if got := float64(d.StdDev()); math.Abs(got-std) > 1+1e-9*std {
		t.Fatalf("std %v, direct %v", got, std)
	}
}

func TestSuspectAtIsTheFirstSuspectInstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 200; trial++ {
		c := bareConfig()
		c.Threshold = []float64{0.01, 0.5, 1, 3, 8, 12, 40, 1000, MaxThreshold}[trial%9]
		c.MinStdDev = time.Duration(1 + rng.Int64N(int64(50*time.Millisecond)))
		c.AcceptablePause = time.Duration(rng.Int64N(int64(time.Second)))
		d := mustNew(t, c)
		now := protocols.Time(rng.Int64N(1 << 50))
		d.Heartbeat(now)
		for i := rng.IntN(30); i > 0; i-- {
			now += protocols.Time(rng.Int64N(int64(300 * ms)))
			d.Heartbeat(now)
		}
		at, ok := d.SuspectAt()
		if !ok {
			t.Fatal("SuspectAt not ok after heartbeats")
		}
		if !d.Suspect(at) || (at > now && d.Suspect(at-1)) {
			t.Fatalf("threshold %v: SuspectAt %v: Suspect there %v, 1ns before %v", c.Threshold, at, d.Suspect(at), d.Suspect(at-1))
		}
	}
}

// Property: for random configurations and random heartbeat sequences, phi
// is finite, non-negative and never decreases between heartbeats.
func TestPhiPropertyFiniteNonNegativeMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		c := Config{
			Threshold:              1 + rng.Float64()*20,
			MaxSamples:             2 + rng.IntN(300),
			MinStdDev:              time.Duration(1 + rng.Int64N(int64(100*time.Millisecond))),
			AcceptablePause:        time.Duration(rng.Int64N(int64(2 * time.Second))),
			FirstHeartbeatEstimate: time.Duration(1 + rng.Int64N(int64(2*time.Second))),
		}
		d := mustNew(t, c)
		now := protocols.Time(rng.Int64N(1 << 40))
		for hb := 0; hb < 50; hb++ {
			d.Heartbeat(now)
			// Silences on every scale, from nanoseconds to days.
			scale := math.Pow(10, float64(rng.IntN(15)))
			prev := -1.0
			probe := now
			for k := 0; k < 40; k++ {
				probe += protocols.Time(rng.Float64() * scale)
				p := d.Phi(probe)
				if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
					t.Fatalf("trial %d: phi(%v) = %v", trial, probe, p)
				}
				if p < prev {
					t.Fatalf("trial %d: phi fell from %v to %v as time went from before to %v", trial, prev, p, probe)
				}
				prev = p
			}
			now += protocols.Time(rng.ExpFloat64() * float64(c.FirstHeartbeatEstimate))
		}
	}
}

func TestNoAllocation(t *testing.T) {
	d := mustNew(t, DefaultConfig())
	now := protocols.Time(0)
	if a := testing.AllocsPerRun(1000, func() { now += 100 * ms; d.Heartbeat(now) }); a != 0 {
		t.Errorf("Heartbeat allocates %v times", a)
	}
	if a := testing.AllocsPerRun(1000, func() { now += ms; _ = d.Phi(now) }); a != 0 {
		t.Errorf("Phi allocates %v times", a)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = d.SuspectAt() }); a != 0 {
		t.Errorf("SuspectAt allocates %v times", a)
	}
	if a := testing.AllocsPerRun(100, d.Reset); a != 0 {
		t.Errorf("Reset allocates %v times", a)
	}
}
