package phi

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultHeartbeatInterval is how often a leader heartbeats its followers
// unless configured otherwise. 50 ms lets the agent's default 200 ms
// election timeout hold four heartbeats, and detects a crashed leader in
// about a third of a second at the default threshold with no false
// suspicion in a simulated week of 20 ms jitter (docs/phi.md), for twenty
// small messages a second per follower.
const DefaultHeartbeatInterval = 50 * time.Millisecond

// Limits enforced by Validate. They keep the detector's exact integer sums
// inside 128 bits and its arithmetic finite; no sensible configuration comes
// near them.
const (
	// MaxMaxSamples bounds Config.MaxSamples.
	MaxMaxSamples = 1 << 16
	// MaxDuration bounds every duration in a Config and is also the longest
	// inter-arrival time the detector records (longer gaps are recorded as
	// MaxDuration).
	MaxDuration = time.Duration(1 << 40) // about 18 minutes
	// MaxThreshold bounds Config.Threshold.
	MaxThreshold = 1e6
)

// Config holds a detector's parameters. The [detector] section of the agent's
// configuration file maps onto it: threshold, max_samples, min_std_dev and
// acceptable_pause directly, and heartbeat_interval onto
// FirstHeartbeatEstimate.
type Config struct {
	// Threshold is the phi at and above which the peer is suspected. Each
	// unit is a factor of ten in the modelled chance that the suspicion is
	// wrong; the default was chosen by the evaluation in docs/phi.md.
	Threshold float64
	// MaxSamples is the size of the sliding window of inter-arrival times.
	// A larger window estimates the jitter more steadily but adapts more
	// slowly when the network changes. Between 2 and MaxMaxSamples.
	MaxSamples int
	// MinStdDev is a floor under the window's standard deviation. On a very
	// quiet network the measured deviation can be a few microseconds, which
	// would turn the first late packet into a certain suspicion.
	MinStdDev time.Duration
	// AcceptablePause is added to the window's mean: a silence this much
	// longer than usual costs nothing, so rare pauses (garbage collection, a
	// descheduled VM, a stalled link) do not raise phi by themselves. It
	// delays the detection of a real crash by the same amount.
	AcceptablePause time.Duration
	// FirstHeartbeatEstimate is the inter-arrival time assumed before any
	// has been measured: the window starts with two samples at 3/4 and 5/4
	// of it, as in Akka, and they age out as real samples arrive. Set it to
	// the sender's heartbeat interval.
	FirstHeartbeatEstimate time.Duration
}

// DefaultConfig returns the defaults chosen in docs/phi.md for heartbeats
// every DefaultHeartbeatInterval.
func DefaultConfig() Config {
	return Config{
		// Over a simulated week of 20 ms jitter, threshold 10 raised no
		// false suspicion (8 raised one) and suspected a crashed sender
		// 0.36 s after the crash on average, 0.58 s at worst.
		Threshold: 10,
		// 200 samples are 10 s of history at the default 50 ms: a
		// steady estimate that forgets a past GC pause or a calmer
		// network within 10 s.
		// 50 and 1000 measured the same in every scenario.
		MaxSamples: 200,
		// Does not bind under 20 ms jitter (the measured deviation is
		// about 28 ms); on a quiet LAN it keeps the first hiccup of a
		// few tens of ms from being judged against microseconds.
		MinStdDev: 25 * time.Millisecond,
		// The measured tails are heavier than normal; without this
		// margin threshold 10 gave 14 false suspicions a day.
		AcceptablePause:        100 * time.Millisecond,
		FirstHeartbeatEstimate: DefaultHeartbeatInterval,
	}
}

// Validate reports every problem with c, or nil if c can build a Detector.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.Threshold) || c.Threshold <= 0 || c.Threshold > MaxThreshold {
		errs = append(errs, fmt.Errorf("phi: threshold %v must be in (0, %g]", c.Threshold, float64(MaxThreshold)))
	}
	if c.MaxSamples < 2 || c.MaxSamples > MaxMaxSamples {
		errs = append(errs, fmt.Errorf("phi: max_samples %d must be in [2, %d]", c.MaxSamples, MaxMaxSamples))
	}
	if c.MinStdDev <= 0 || c.MinStdDev > MaxDuration {
		errs = append(errs, fmt.Errorf("phi: min_std_dev %v must be in (0, %v]", c.MinStdDev, MaxDuration))
	}
	if c.AcceptablePause < 0 || c.AcceptablePause > MaxDuration {
		errs = append(errs, fmt.Errorf("phi: acceptable_pause %v must be in [0, %v]", c.AcceptablePause, MaxDuration))
	}
	if c.FirstHeartbeatEstimate <= 0 || c.FirstHeartbeatEstimate > MaxDuration {
		errs = append(errs, fmt.Errorf("phi: first heartbeat estimate (heartbeat_interval) %v must be in (0, %v]", c.FirstHeartbeatEstimate, MaxDuration))
	}
	return errors.Join(errs...)
}
