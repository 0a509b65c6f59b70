// Package tune recommends election timings from measured heartbeat gaps
// (`agent tune`): the seed's advice is to set lease and timeout values
// from measured pause and latency percentiles and to document the
// failover time they imply. It is pure arithmetic over what agents report
// (api.HeartbeatStats); it must never read a clock or the network.
package tune

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// Settings are the timings in force, as the configuration names them.
type Settings struct {
	Protocol          string
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// Phi detector settings ([detector]).
	Threshold       float64
	MinStdDev       time.Duration
	AcceptablePause time.Duration
}

// Gaps is one member's measured heartbeat gaps.
type Gaps struct {
	Member string
	Stats  api.HeartbeatStats
}

// Verdict is what a setting implies for the measured gaps.
type Verdict struct {
	Settings Settings
	// SuspectAfter is how long after a heartbeat the phi detector
	// suspects the member, with the measured distribution in its window.
	SuspectAfter time.Duration
	// PhiFalsePerDay is the phi model's own prediction: 10^-threshold
	// per heartbeat, over a day's heartbeats.
	PhiFalsePerDay float64
	// TailFalsePerDay is the prediction from the measured tail: the
	// share of gaps longer than SuspectAfter, extrapolated through the
	// measured percentiles, over a day's heartbeats.
	TailFalsePerDay float64
	// ElectionFalsePerDay is the same for majority's election timer: a
	// gap longer than the election timeout starts an election.
	ElectionFalsePerDay float64
	// Failover is the time from a leader's crash to a successor's
	// election that the timings imply (worst case of the randomised
	// timers, one message round excluded).
	Failover time.Duration
}

// Report is the worst member's measurement, the verdict on the settings
// in force, and a recommended setting with its own verdict.
type Report struct {
	Worst       Gaps
	Current     Verdict
	Recommended Verdict
	// Why says what drove the recommendation.
	Why string
}

// MinSamples is how many gaps a member needs before its tail means
// anything: fewer than 1,000 and p99.9 is a guess.
const MinSamples = 1000

// Recommend judges cur against the measured gaps and recommends timings
// whose predicted false alarms stay at or below targetPerDay per member.
// The worst member (highest p99.9) decides. It errs when no member has
// MinSamples gaps yet.
func Recommend(cur Settings, gaps []Gaps, targetPerDay float64) (Report, error) {
	var worst *Gaps
	for i := range gaps {
		g := &gaps[i]
		if g.Stats.Samples < MinSamples {
			continue
		}
		if worst == nil || g.Stats.P999Ms > worst.Stats.P999Ms {
			worst = g
		}
	}
	if worst == nil {
		return Report{}, fmt.Errorf("no member has %d heartbeat gaps measured yet (a leader measures its followers, a follower its leader, about 20 a second at the default): run this on the leader after a minute or more", MinSamples)
	}
	rep := Report{Worst: *worst, Current: judge(cur, worst.Stats)}
	rec := cur
	// Raise the phi threshold, up to 12, then the acceptable pause,
	// until the measured tail predicts no more than the target: a
	// heavier tail than the normal model's is a pause to accept, and each
	// step of the threshold buys less and less time. Then make the
	// election timeout cover the same tail.
	for rec.Threshold < 12 && judge(rec, worst.Stats).TailFalsePerDay > targetPerDay {
		rec.Threshold++
	}
	for judge(rec, worst.Stats).TailFalsePerDay > targetPerDay && rec.AcceptablePause < time.Minute {
		rec.AcceptablePause += 50 * time.Millisecond
	}
	for judge(rec, worst.Stats).ElectionFalsePerDay > targetPerDay && rec.ElectionTimeout < time.Minute {
		rec.ElectionTimeout += 50 * time.Millisecond
	}
	rep.Recommended = judge(rec, worst.Stats)
	switch {
	case rec == cur:
		rep.Why = "the settings in force already keep the predicted false alarms within the target"
	default:
		rep.Why = fmt.Sprintf("%s's heartbeat gaps reach %v at p99.9 and %v at the longest", worst.Member,
			ms(worst.Stats.P999Ms), ms(worst.Stats.MaxGapMs))
	}
	return rep, nil
}

// judge computes what s implies for gaps distributed as st.
func judge(s Settings, st api.HeartbeatStats) Verdict {
	mean := ms(st.P50Ms) + s.AcceptablePause
	// A normal through p50 and p99 (z = 2.326), floored as the detector
	// floors it.
	std := max(time.Duration(float64(ms(st.P99Ms)-ms(st.P50Ms))/2.326), s.MinStdDev)
	suspect := mean + time.Duration(zForPhi(s.Threshold)*float64(std))
	perDay := float64(24*time.Hour) / float64(max(s.HeartbeatInterval, time.Millisecond))
	v := Verdict{
		Settings:            s,
		SuspectAfter:        suspect,
		PhiFalsePerDay:      math.Pow(10, -s.Threshold) * perDay,
		TailFalsePerDay:     tailShare(st, suspect) * perDay,
		ElectionFalsePerDay: tailShare(st, s.ElectionTimeout) * perDay,
	}
	switch s.Protocol {
	case "majority":
		// The last heartbeat, then a follower's randomised timer in
		// [ET, 2ET).
		v.Failover = 2 * s.ElectionTimeout
	default:
		// Bully and ring: the detector's suspicion, then an election
		// round bounded by the election timeout.
		v.Failover = suspect + s.ElectionTimeout
	}
	return v
}

// tailShare is the share of gaps longer than d: log-linear between the
// measured points (p50: 0.5, p99: 0.01, p99.9: 0.001, the longest:
// 1/samples), and beyond the longest a hundredth of that per doubling (a
// tail falling as a power law of exponent about 6.6: heavier than a
// normal's, lighter than the measured one's usually is up to its longest
// gap).
func tailShare(st api.HeartbeatStats, d time.Duration) float64 {
	type pt struct {
		at    time.Duration
		share float64
	}
	pts := []pt{{ms(st.P50Ms), 0.5}, {ms(st.P99Ms), 0.01}, {ms(st.P999Ms), 0.001}}
	if n := float64(st.Samples); n > 1000 {
		pts = append(pts, pt{ms(st.MaxGapMs), 1 / n})
	}
	slices.SortStableFunc(pts, func(a, b pt) int { return int(a.at - b.at) })
	if d <= pts[0].at {
		return 0.5
	}
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if d <= b.at {
			if b.at == a.at {
				return b.share
			}
			f := float64(d-a.at) / float64(b.at-a.at)
			return math.Exp(math.Log(a.share) + f*(math.Log(b.share)-math.Log(a.share)))
		}
	}
	last := pts[len(pts)-1]
	doublings := math.Log2(float64(d) / float64(max(last.at, time.Millisecond)))
	return last.share * math.Pow(0.01, doublings)
}

// zForPhi is the z at which the normal tail is 10^-phi.
func zForPhi(phi float64) float64 {
	lo, hi := 0.0, 40.0
	for range 100 {
		mid := (lo + hi) / 2
		if -math.Log10(0.5*math.Erfc(mid/math.Sqrt2)) < phi {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
