package core

import (
	"math"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
)

// Heartbeat inter-arrival statistics per member: what timings a cluster
// can bear is measured, not guessed (agent members -v, agent tune). A gap
// counts only between two beats of one watch (the member's shared
// detector, core/liveness.go, saw the previous one), so the time a member spent down, or not
// heartbeating this node at all, is never taken for a pause.

// Buckets of the inter-arrival histogram: bucket i holds gaps in
// [arrivalBase·arrivalRatio^i, arrivalBase·arrivalRatio^(i+1)); the first
// takes everything shorter, the last everything longer. 1 ms to about
// 90 s at 10 % resolution, in 120 counters per member.
const (
	arrivalBuckets = 120
	arrivalBase    = float64(time.Millisecond)
	arrivalRatio   = 1.1
)

// arrivals is one member's inter-arrival histogram and its longest gap.
type arrivals struct {
	counts [arrivalBuckets]uint32
	n      uint64
	max    time.Duration
}

func arrivalBucket(gap time.Duration) int {
	if float64(gap) < arrivalBase {
		return 0
	}
	i := int(math.Log(float64(gap)/arrivalBase) / math.Log(arrivalRatio))
	return min(i, arrivalBuckets-1)
}

// bucketTop is the upper bound of bucket i: a percentile is reported as
// the bound below which that share of gaps fell, never less.
func bucketTop(i int) time.Duration {
	return time.Duration(arrivalBase * math.Pow(arrivalRatio, float64(i+1)))
}

func (a *arrivals) add(gap time.Duration) {
	if gap < 0 {
		return
	}
	i := arrivalBucket(gap)
	if a.counts[i] == math.MaxUint32 {
		// Keep the shape and stay bounded: halve every counter.
		for j := range a.counts {
			a.counts[j] /= 2
		}
		a.n = 0
		for _, c := range a.counts {
			a.n += uint64(c)
		}
	}
	a.counts[i]++
	a.n++
	a.max = max(a.max, gap)
}

// quantile is the gap below which share q of the samples fell.
func (a *arrivals) quantile(q float64) time.Duration {
	if a.n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(a.n)))
	var seen uint64
	for i, c := range a.counts {
		seen += uint64(c)
		if seen >= want {
			return min(bucketTop(i), a.max)
		}
	}
	return a.max
}

// exceeding is the share of samples longer than d (by bucket: those whose
// whole bucket lies above d).
func (a *arrivals) exceeding(d time.Duration) float64 {
	if a.n == 0 {
		return 0
	}
	var above uint64
	for i, c := range a.counts {
		if i > 0 && bucketTop(i-1) >= d {
			above += uint64(c)
		}
	}
	return float64(above) / float64(a.n)
}

// heartbeatStats is member id's inter-arrival summary for the socket
// (nil before two heartbeats of one watch).
func (n *Node) heartbeatStats(id protocols.ID) *api.HeartbeatStats {
	a := n.live.stats[id]
	if a == nil || a.n == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return &api.HeartbeatStats{
		Samples:  a.n,
		P50Ms:    ms(a.quantile(0.5)),
		P99Ms:    ms(a.quantile(0.99)),
		P999Ms:   ms(a.quantile(0.999)),
		MaxGapMs: ms(a.max),
	}
}
