package phi

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Detector is one peer's phi-accrual failure detector: feed it the arrival
// time of every heartbeat from that peer and ask it for phi at any time.
//
// The window statistics are kept as exact integer sums (the sum in 64 bits,
// the sum of squares in 128), updated in O(1) as samples enter and leave the
// ring. Unlike floating-point running sums they cannot drift however long
// the detector runs, and the variance they give is never negative.
//
// A Detector is not safe for concurrent use.
type Detector struct {
	cfg Config

	ring  []int64 // inter-arrival times in ns, oldest at head once full
	head  int     // next slot to write
	n     int     // samples in the ring
	sum   uint64
	sqHi  uint64 // sum of squares, high 64 bits
	sqLo  uint64 // sum of squares, low 64 bits
	last  protocols.Time
	heard bool // at least one heartbeat since New or Reset

	// Derived after every change to the window, so Phi does no more
	// than one division, one erfc and one logarithm.
	mean float64 // ns, AcceptablePause included
	std  float64 // ns, MinStdDev floor applied

	// crossZ is where phi crosses the threshold in z = (elapsed −
	// mean)/std: it depends on the threshold alone, so SuspectAt finds
	// the crossing time from it in a few evaluations of phi, not a
	// bisection of ~64 (an agent running many elections asks once per
	// detector per heartbeat).
	crossZ float64
}

// New returns a detector for c, or the reasons c is invalid.
func New(c Config) (*Detector, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("phi: new detector: %w", err)
	}
	d := &Detector{cfg: c, ring: make([]int64, c.MaxSamples), crossZ: crossingZ(c.Threshold)}
	d.Reset()
	return d, nil
}

// Config returns the configuration the detector was built with.
func (d *Detector) Config() Config { return d.cfg }

// Reset forgets every heartbeat, as if the detector were new: use it when
// the watched peer changes (a new leader), so one node's history is not held
// against another. It does not allocate.
func (d *Detector) Reset() {
	d.head, d.n, d.sum, d.sqHi, d.sqLo = 0, 0, 0, 0, 0
	d.last, d.heard = 0, false
	// Akka's prior: two samples a quarter of the estimate either side of
	// it, so the first gaps are judged against mean = estimate and
	// deviation = estimate/4 until real samples push them out.
	est := int64(d.cfg.FirstHeartbeatEstimate)
	d.add(est - est/4)
	d.add(est + est/4)
	d.derive()
}

// Heartbeat records a heartbeat that arrived at now. The first heartbeat
// only starts the clock; each later one adds the time since the previous
// one to the window, evicting the oldest sample when the window is full.
// A timestamp earlier than the previous heartbeat (which a monotonic clock
// never produces) is treated as arriving with it, so the detector's notion
// of time never goes back.
func (d *Detector) Heartbeat(now protocols.Time) {
	if !d.heard {
		d.last, d.heard = now, true
		return
	}
	gap := int64(0)
	if now > d.last {
		gap = int64(now - d.last)
		d.last = now
	}
	if gap > int64(MaxDuration) {
		gap = int64(MaxDuration)
	}
	d.add(gap)
	d.derive()
}

// add puts one sample in the ring, evicting the oldest when full. Samples
// are in [0, MaxDuration] = [0, 2^40) and the ring holds at most 2^16 of
// them, so sum < 2^56 and the sum of squares < 2^96: both exact.
func (d *Detector) add(x int64) {
	if d.n == len(d.ring) {
		old := uint64(d.ring[d.head])
		d.sum -= old
		hi, lo := bits.Mul64(old, old)
		var borrow uint64
		d.sqLo, borrow = bits.Sub64(d.sqLo, lo, 0)
		d.sqHi, _ = bits.Sub64(d.sqHi, hi, borrow)
	} else {
		d.n++
	}
	d.ring[d.head] = x
	d.head++
	if d.head == len(d.ring) {
		d.head = 0
	}
	u := uint64(x)
	d.sum += u
	hi, lo := bits.Mul64(u, u)
	var carry uint64
	d.sqLo, carry = bits.Add64(d.sqLo, lo, 0)
	d.sqHi, _ = bits.Add64(d.sqHi, hi, carry)
}

// derive recomputes mean and deviation from the exact sums. The variance's
// numerator n·Σx² - (Σx)² is formed in 128-bit integers, where it is exact
// and non-negative (Cauchy-Schwarz), and only then converted to float64:
// the catastrophic cancellation of the textbook E[x²]-E[x]² cannot happen.
func (d *Detector) derive() {
	n := uint64(d.n)
	// n·Σx² < 2^16·2^96 and (Σx)² < 2^112: both fit in 128 bits.
	aHi, aLo := bits.Mul64(d.sqLo, n)
	aHi += d.sqHi * n
	bHi, bLo := bits.Mul64(d.sum, d.sum)
	lo, borrow := bits.Sub64(aLo, bLo, 0)
	hi, _ := bits.Sub64(aHi, bHi, borrow)
	num := float64(hi)*0x1p64 + float64(lo)
	nf := float64(n)
	std := math.Sqrt(num) / nf
	if floor := float64(d.cfg.MinStdDev); std < floor {
		std = floor
	}
	d.mean = float64(d.sum)/nf + float64(d.cfg.AcceptablePause)
	d.std = std
}

// Phi returns the suspicion level at now: -log10 of the modelled
// probability that a heartbeat from a live peer would arrive even later
// than now. It is 0 before the first heartbeat (there is nothing to be late
// yet), always finite and non-negative, and never decreases as now grows
// between heartbeats. It does not allocate.
func (d *Detector) Phi(now protocols.Time) float64 {
	if !d.heard {
		return 0
	}
	elapsed := 0.0
	if now > d.last {
		elapsed = float64(now - d.last)
	}
	return phiOfZ((elapsed - d.mean) / d.std)
}

// Suspect reports whether Phi(now) has reached the configured threshold.
func (d *Detector) Suspect(now protocols.Time) bool {
	return d.Phi(now) >= d.cfg.Threshold
}

// SuspectAt returns the earliest time at which Suspect becomes true if no
// further heartbeat arrives, so a caller can arm one timer per heartbeat
// instead of polling. ok is false before the first heartbeat, when no
// silence can make the detector suspect. It costs about 64 evaluations of
// Phi and does not allocate.
func (d *Detector) SuspectAt() (t protocols.Time, ok bool) {
	if !d.heard {
		return 0, false
	}
	thr := d.cfg.Threshold
	at := func(elapsed int64) bool { return phiOfZ((float64(elapsed)-d.mean)/d.std) >= thr }
	if at(0) {
		return d.last, true
	}
	// The answer is the least elapsed time at which phi reaches the
	// threshold (phi never decreases with it). crossZ puts it within a
	// nanosecond or two; the steps below make it exact, and a bisection
	// takes over in the (never seen) case that they do not settle.
	guess := d.mean + d.crossZ*d.std
	if guess >= 1 && guess < math.MaxInt64/4 {
		hi := int64(math.Ceil(guess))
		for range crossSteps {
			switch {
			case !at(hi):
				hi++
			case hi > 1 && at(hi-1):
				hi--
			default:
				return d.suspectAfter(hi)
			}
		}
	}
	lo, hi := int64(0), int64(d.mean+1500*d.std)
	for hi < math.MaxInt64/2 && !at(hi) {
		hi *= 2
	}
	// Invariant: phi(lo) < threshold <= phi(hi).
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

// crossSteps bounds SuspectAt's steps from its guess to the exact
// crossing.
const crossSteps = 8

// suspectAfter is the time elapsed after the last heartbeat, saturated.
func (d *Detector) suspectAfter(elapsed int64) (protocols.Time, bool) {
	if int64(d.last) > math.MaxInt64-elapsed {
		return protocols.Time(math.MaxInt64), true
	}
	return d.last + protocols.Time(elapsed), true
}

// crossingZ is the z at which phiOfZ reaches threshold, to float64
// precision: a bisection once per detector.
func crossingZ(threshold float64) float64 {
	lo, hi := -64.0, 64.0
	for phiOfZ(hi) < threshold && hi < 1e12 {
		hi *= 2
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid == lo || mid == hi {
			break
		}
		if phiOfZ(mid) >= threshold {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Last returns the arrival time of the latest heartbeat; ok is false if
// none has arrived since New or Reset.
func (d *Detector) Last() (t protocols.Time, ok bool) { return d.last, d.heard }

// Samples returns how many inter-arrival times are in the window, the two
// prior samples included until they are evicted.
func (d *Detector) Samples() int { return d.n }

// Mean returns the expected silence the detector judges against: the
// window's mean inter-arrival time plus AcceptablePause.
func (d *Detector) Mean() time.Duration { return time.Duration(math.Round(d.mean)) }

// StdDev returns the deviation the detector uses: the window's standard
// deviation, or MinStdDev if that is larger.
func (d *Detector) StdDev() time.Duration { return time.Duration(math.Round(d.std)) }
