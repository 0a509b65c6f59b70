package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// scenario is a network and sender model: how long each heartbeat takes to
// arrive and when the sender is paused.
type scenario struct {
	key, name string
	// delay draws the one-way delay of a heartbeat sent at t.
	delay func(rng *rand.Rand, t protocols.Time) time.Duration
	// pauseRate is the mean number of sender pauses per hour (0: none);
	// pause durations are log-uniform in [pauseMin, pauseMax].
	pauseRate          float64
	pauseMin, pauseMax time.Duration
}

// jitter returns base plus a gamma(shape 2) queueing delay whose standard
// deviation is sd: right-skewed like real queues, with an exponential tail
// heavier than the normal one the detector assumes.
func jitter(rng *rand.Rand, base, sd time.Duration) time.Duration {
	theta := float64(sd) / math.Sqrt2
	return base + time.Duration(theta*(rng.ExpFloat64()+rng.ExpFloat64()))
}

var scenarios = []scenario{
	{
		key:  "a",
		name: "20 ms jitter: delay 5 ms + Γ(2) queueing, sd 20 ms",
		delay: func(rng *rand.Rand, _ protocols.Time) time.Duration {
			return jitter(rng, 5*time.Millisecond, 20*time.Millisecond)
		},
	},
	{
		key:  "b",
		name: "(a) + sender pauses (GC, VM steal): 4 per hour, log-uniform 50 ms–1 s",
		delay: func(rng *rand.Rand, _ protocols.Time) time.Duration {
			return jitter(rng, 5*time.Millisecond, 20*time.Millisecond)
		},
		pauseRate: 4, pauseMin: 50 * time.Millisecond, pauseMax: time.Second,
	},
	{
		key:  "c",
		name: "latency steps every 15 min between (a) and 150 ms + Γ(2) sd 40 ms",
		delay: func(rng *rand.Rand, t protocols.Time) time.Duration {
			if (t/protocols.Time(15*time.Minute))%2 == 1 {
				return jitter(rng, 150*time.Millisecond, 40*time.Millisecond)
			}
			return jitter(rng, 5*time.Millisecond, 20*time.Millisecond)
		},
	},
}

// watcher is one failure detector under evaluation, fed the same arrivals
// as every other.
type watcher interface {
	heartbeat(t protocols.Time)
	suspect(t protocols.Time) bool
	// suspectAt is when it will suspect if nothing more arrives.
	suspectAt() protocols.Time
}

type phiWatcher struct{ d *phi.Detector }

func (w phiWatcher) heartbeat(t protocols.Time)    { w.d.Heartbeat(t) }
func (w phiWatcher) suspect(t protocols.Time) bool { return w.d.Suspect(t) }
func (w phiWatcher) suspectAt() protocols.Time     { t, _ := w.d.SuspectAt(); return t }

// fixedWatcher is the classic detector: suspect after a fixed silence.
type fixedWatcher struct {
	timeout time.Duration
	last    *protocols.Time
}

func (w fixedWatcher) heartbeat(t protocols.Time)    { *w.last = t }
func (w fixedWatcher) suspect(t protocols.Time) bool { return t.Sub(*w.last) >= w.timeout }
func (w fixedWatcher) suspectAt() protocols.Time     { return w.last.Add(w.timeout) }

// candidate names a detector configuration and builds fresh instances.
type candidate struct {
	family string // curve it belongs to in the plot
	label  string // point label: threshold or timeout
	make   func() watcher
}

func phiCandidate(family string, c phi.Config) candidate {
	return candidate{family: family, label: fmt.Sprintf("%g", c.Threshold), make: func() watcher {
		d, err := phi.New(c)
		if err != nil {
			panic(fmt.Sprintf("phieval: %v", err)) // the configurations are ours
		}
		return phiWatcher{d}
	}}
}

func fixedCandidate(timeout time.Duration) candidate {
	return candidate{family: "fixed timeout", label: fmt.Sprintf("%dms", timeout.Milliseconds()), make: func() watcher {
		return fixedWatcher{timeout: timeout, last: new(protocols.Time)}
	}}
}

// result is what one candidate did in one scenario.
type result struct {
	cand       candidate
	falses     int             // suspicions of a live, running sender
	pauseSusp  int             // suspicions of a live sender that was paused
	detections []time.Duration // crash to suspicion, one per trial
}

// perDay scales a count over the simulated length to a daily rate.
func perDay(n int, simulated time.Duration) float64 {
	return float64(n) * float64(24*time.Hour) / float64(simulated)
}

func (r result) meanDetection() time.Duration {
	var s time.Duration
	for _, d := range r.detections {
		s += d
	}
	return s / time.Duration(max(1, len(r.detections)))
}

// quantile of the detection times, q in [0, 1]. Sorts in place.
func (r result) quantile(q float64) time.Duration {
	if len(r.detections) == 0 {
		return 0
	}
	slices.Sort(r.detections)
	return r.detections[int(q*float64(len(r.detections)-1))]
}

// simulate streams heartbeats sent every interval for length through the
// scenario and feeds every candidate the same arrivals (FIFO, as on the
// libp2p stream the agent uses). A candidate that suspects the sender
// before the next arrival has falsely suspected a live node: phi never
// decreases in a silence, so checking at the arrival instant catches every
// suspicion. Every crashEvery-th heartbeat a crash is tried: the sender
// dies at a uniform instant before its next tick, and the detection time is
// how long after that instant each candidate would suspect it.
func simulate(sc scenario, cands []candidate, interval, length time.Duration, crashEvery int, seed uint64) []result {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ws := make([]watcher, len(cands))
	res := make([]result, len(cands))
	for i, c := range cands {
		ws[i], res[i].cand = c.make(), c
	}
	end := protocols.Time(length)
	// The next sender pause, from a Poisson process.
	nextPause := func(after protocols.Time) (protocols.Time, protocols.Time) {
		if sc.pauseRate == 0 {
			return math.MaxInt64, math.MaxInt64
		}
		start := after + protocols.Time(rng.ExpFloat64()*float64(time.Hour)/sc.pauseRate)
		lmin, lmax := math.Log(float64(sc.pauseMin)), math.Log(float64(sc.pauseMax))
		return start, start + protocols.Time(math.Exp(lmin+rng.Float64()*(lmax-lmin)))
	}
	pStart, pEnd := nextPause(0)
	var lastSend, lastArrival protocols.Time = -1, 0
	for k := 0; ; k++ {
		send := protocols.Time(k) * protocols.Time(interval)
		if send >= end {
			break
		}
		for send >= pEnd {
			pStart, pEnd = nextPause(pEnd)
		}
		paused := false
		if send >= pStart {
			// A paused process sends when it resumes, and a ticker
			// drops the ticks it missed: one heartbeat, then the
			// schedule again.
			send, paused = pEnd, true
		}
		if send == lastSend {
			continue
		}
		lastSend = send
		arrival := max(send.Add(sc.delay(rng, send)), lastArrival)
		lastArrival = arrival
		for i, w := range ws {
			switch {
			case k == 0 || !w.suspect(arrival):
			case paused:
				res[i].pauseSusp++
			default:
				res[i].falses++
			}
			w.heartbeat(arrival)
		}
		if crashEvery > 0 && k%crashEvery == crashEvery-1 {
			crash := send.Add(time.Duration(rng.Float64() * float64(interval)))
			for i, w := range ws {
				res[i].detections = append(res[i].detections, w.suspectAt().Sub(crash))
			}
		}
	}
	return res
}
