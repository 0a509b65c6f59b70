package sim

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what runs did. Add merges them.
type Stats struct {
	// Schedules is the number of runs.
	Schedules int
	// Faults counts injected faults by kind (drops and duplicates per
	// message).
	Faults [NumFaultKinds]int64
	// Elections counts (epoch, leader) pairs seen leading for the first
	// time.
	Elections int64
	// Violations is the number of runs that broke an invariant.
	Violations int
	// Events is the number of queue events processed.
	Events int64
	// Messages is the number of messages the protocols sent.
	Messages int64
	// FencedWrites and FencedRejected count leader writes the fenced
	// resource accepted and refused.
	FencedWrites, FencedRejected int64
	// VirtualTime is the total simulated time.
	VirtualTime time.Duration
	// Failovers counts the core-mode failover probes that ended in
	// agreement (Checks.FailoverBound); FailoverHist buckets their time
	// from the crash to the agreement of every live node by
	// FailoverBucket, the last bucket holding everything longer, and
	// FailoverMax is the longest.
	Failovers    int64
	FailoverHist [failoverBuckets]int64
	FailoverMax  time.Duration
	// Rejoins counts the wiped restarts (FaultWipedRestart) after which
	// the wiped node and every other running node came to list each
	// other alive under their current identities; RejoinHist and
	// RejoinMax time it from the restart, as FailoverHist does. A wiped
	// node crashed again first is not counted.
	Rejoins    int64
	RejoinHist [failoverBuckets]int64
	RejoinMax  time.Duration
	// IsolationWindows counts the isolation check's windows (a single
	// node down, the rest intact; Checks.Isolation), and IsolationWatches
	// the elections watched in them.
	IsolationWindows, IsolationWatches int64
}

// FailoverBucket is the width of a Stats.FailoverHist bucket.
const FailoverBucket = 10 * time.Millisecond

const failoverBuckets = 1000

// addFailover records one failover probe's time.
func (s *Stats) addFailover(d time.Duration) {
	s.Failovers++
	s.FailoverHist[min(int(d/FailoverBucket), failoverBuckets-1)]++
	s.FailoverMax = max(s.FailoverMax, d)
}

// FailoverPercentile returns the upper edge of the bucket holding the
// p-th percentile (0 < p <= 100) of the failover probes' times.
func (s *Stats) FailoverPercentile(p float64) time.Duration {
	return percentile(s.FailoverHist[:], s.Failovers, s.FailoverMax, p)
}

// addRejoin records the time a wiped node took to be found.
func (s *Stats) addRejoin(d time.Duration) {
	s.Rejoins++
	s.RejoinHist[min(int(d/FailoverBucket), failoverBuckets-1)]++
	s.RejoinMax = max(s.RejoinMax, d)
}

// RejoinPercentile is FailoverPercentile for the wiped restarts' times.
func (s *Stats) RejoinPercentile(p float64) time.Duration {
	return percentile(s.RejoinHist[:], s.Rejoins, s.RejoinMax, p)
}

// percentile returns the upper edge of the bucket of hist (n counts in
// all, the largest mx) holding the p-th percentile.
func percentile(hist []int64, n int64, mx time.Duration, p float64) time.Duration {
	want := int64(float64(n)*p/100 + 0.5)
	var seen int64
	for i, c := range hist {
		if seen += c; seen >= max(want, 1) {
			return time.Duration(i+1) * FailoverBucket
		}
	}
	return mx
}

// Add merges o into s.
func (s *Stats) Add(o Stats) {
	s.Schedules += o.Schedules
	for i := range s.Faults {
		s.Faults[i] += o.Faults[i]
	}
	s.Elections += o.Elections
	s.IsolationWindows += o.IsolationWindows
	s.IsolationWatches += o.IsolationWatches
	s.Violations += o.Violations
	s.Events += o.Events
	s.Messages += o.Messages
	s.FencedWrites += o.FencedWrites
	s.FencedRejected += o.FencedRejected
	s.VirtualTime += o.VirtualTime
	s.Failovers += o.Failovers
	for i := range s.FailoverHist {
		s.FailoverHist[i] += o.FailoverHist[i]
	}
	s.FailoverMax = max(s.FailoverMax, o.FailoverMax)
	s.Rejoins += o.Rejoins
	for i := range s.RejoinHist {
		s.RejoinHist[i] += o.RejoinHist[i]
	}
	s.RejoinMax = max(s.RejoinMax, o.RejoinMax)
}

// TotalFaults sums Faults.
func (s *Stats) TotalFaults() int64 {
	var t int64
	for _, f := range s.Faults {
		t += f
	}
	return t
}

// String renders the stats, one figure per line.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedules run:   %d\n", s.Schedules)
	fmt.Fprintf(&b, "faults injected: %d\n", s.TotalFaults())
	for k := range NumFaultKinds {
		fmt.Fprintf(&b, "  %-15s %d\n", k.String()+":", s.Faults[k])
	}
	fmt.Fprintf(&b, "elections:       %d\n", s.Elections)
	fmt.Fprintf(&b, "violations:      %d\n", s.Violations)
	fmt.Fprintf(&b, "events:          %d\n", s.Events)
	fmt.Fprintf(&b, "messages:        %d\n", s.Messages)
	fmt.Fprintf(&b, "fenced writes:   %d accepted, %d rejected\n", s.FencedWrites, s.FencedRejected)
	fmt.Fprintf(&b, "virtual time:    %v\n", s.VirtualTime.Round(time.Second))
	if s.IsolationWindows > 0 {
		fmt.Fprintf(&b, "isolation:       %d windows, %d elections watched\n", s.IsolationWindows, s.IsolationWatches)
	}
	if s.Failovers > 0 {
		fmt.Fprintf(&b, "failover probe:  %d runs, crash to agreement p50 %v, p90 %v, p99 %v, max %v\n", s.Failovers,
			s.FailoverPercentile(50), s.FailoverPercentile(90), s.FailoverPercentile(99), s.FailoverMax.Round(time.Millisecond))
	}
	if s.Rejoins > 0 {
		fmt.Fprintf(&b, "wiped rejoined:  %d restarts, restart to all listing each other p50 %v, p90 %v, p99 %v, max %v\n", s.Rejoins,
			s.RejoinPercentile(50), s.RejoinPercentile(90), s.RejoinPercentile(99), s.RejoinMax.Round(time.Millisecond))
	}
	return b.String()
}

// ScheduleSeed derives the seed of schedule i of a batch started from base
// (splitmix64), so any schedule of a batch can be replayed on its own.
func ScheduleSeed(base uint64, i int) uint64 {
	z := base + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Batch configures RunMany.
type Batch struct {
	// Base is the batch seed; schedule i runs with ScheduleSeed(Base, i).
	Base uint64
	// Schedules is how many to run.
	Schedules int
	// Workers run schedules in parallel; zero means GOMAXPROCS.
	Workers int
	// MaxViolations stops the batch early once this many were found; zero
	// means never stop early.
	MaxViolations int
}

// RunMany runs a batch of independent schedules on Workers goroutines (each
// run itself is single-threaded and deterministic) and returns the merged
// stats and the violating results, sorted by schedule index. A setup error
// (bad Options, a Factory that fails at start) ends the batch.
func RunMany(o Options, b Batch) (Stats, []Result, error) {
	workers := b.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type bad struct {
		i int
		r Result
	}
	var (
		next     atomic.Int64
		nbad     atomic.Int64
		stop     atomic.Bool
		mu       sync.Mutex
		total    Stats
		failures []bad
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local Stats
			var localBad []bad
			var err error
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= b.Schedules {
					break
				}
				var res Result
				res, err = Run(o, ScheduleSeed(b.Base, i))
				if err != nil {
					stop.Store(true)
					break
				}
				local.Add(res.Stats)
				if res.Violation != nil {
					localBad = append(localBad, bad{i, res})
					if b.MaxViolations > 0 && nbad.Add(1) >= int64(b.MaxViolations) {
						stop.Store(true)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total.Add(local)
			failures = append(failures, localBad...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(failures, func(x, y bad) int { return x.i - y.i })
	out := make([]Result, len(failures))
	for i, f := range failures {
		out[i] = f.r
	}
	return total, out, firstErr
}
