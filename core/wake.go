package core

import (
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Timer slack for an agent that runs several elections. Each election's
// core arms its own timers; a leader's heartbeat rounds, armed from the
// moment each election began to lead, fall anywhere within the interval,
// and each would cost a wake-up and a frame per peer of its own. Waking a
// little later than the earliest deadline, at the last deadline within
// the slack, serves several at once; and since each election re-arms its
// next round from the moment it was served, elections served together
// stay together: within a few rounds every heartbeat round of the agent
// falls in one wake-up, and its messages to each peer in one frame
// (docs/elections.md). A deadline is served at most WakeSlack late: a
// heartbeat that late is within the detector's jitter (a tenth of the
// interval), and the lease is judged at the instant of asking, not at a
// wake-up, so no claim outlives it.

// WakeSlack is how late past its deadline a timer may be served to join
// others: a tenth of the heartbeat interval.
func WakeSlack(heartbeat time.Duration) time.Duration { return heartbeat / 10 }

// CoalescedWake returns when to wake to serve wakes, the deadlines of
// several elections' cores (Node.NextWake): the earliest, or a later one
// within slack of it, so that one wake-up serves them all. With a single
// deadline it is that deadline.
func CoalescedWake(wakes []protocols.Time, slack time.Duration) protocols.Time {
	if len(wakes) == 0 {
		return 0
	}
	first := wakes[0]
	for _, w := range wakes[1:] {
		if w < first {
			first = w
		}
	}
	at := first
	limit := first.Add(slack)
	for _, w := range wakes {
		if w > at && w <= limit {
			at = w
		}
	}
	return at
}
