//go:build linux

package transport

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCoalesced sends one round of heartbeats (one per election) from
// one host to 4 peers and waits until every peer has them all: an idle
// leader's heartbeat round. The variants: the elections' messages in one
// SendAll (coalesced frames), in separate Sends over v2 (the sender packs
// whatever it finds queued), and separate v1 frames (every release before
// coalescing; v1 carries only the default election, so these are default
// messages of the same size class). elections=1 is the baseline the target
// compares against. Reported per round: frames, writes and bytes the
// sender put on its streams, and the CPU time of the whole process (both
// ends of every stream run in it).
//
//	go test -run '^$' -bench Coalesced -benchtime 2000x ./transport/
func BenchmarkCoalesced(b *testing.B) {
	const peers = 4
	type variant struct {
		name      string
		elections int
		sendAll   bool
		v1        bool
	}
	var variants []variant
	for _, n := range []int{1, 50} {
		variants = append(variants,
			variant{fmt.Sprintf("elections=%d/v2-SendAll", n), n, true, false},
			variant{fmt.Sprintf("elections=%d/v2-Send", n), n, false, false},
			variant{fmt.Sprintf("elections=%d/v1-Send", n), n, false, true})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			big := func(c *Config) { quiet(c); c.QueueLen = 4 * v.elections; c.InboundLen = 4 * v.elections }
			x := newTestHost(b, 1, testKey, big)
			ys := make([]*testHost, peers)
			for i := range ys {
				mods := []func(*Config){big}
				if v.v1 {
					mods = append(mods, onlyV1)
				}
				ys[i] = newTestHost(b, protocols.ID(i+2), testKey, mods...)
				admit(b, x, ys[i])
				admit(b, ys[i], x)
			}
			round := make([]protocols.Message, 0, peers*v.elections)
			for e := range v.elections {
				el := fmt.Sprintf("election-%02d", e)
				if v.v1 || e == 0 {
					el = ""
				}
				for _, y := range ys {
					m := msg(protocols.MsgHeartbeat, 1, y.cfg.Self, 0)
					m.Election, m.Epoch = el, 3
					round = append(round, m)
				}
			}
			send := func() {
				if v.sendAll {
					x.SendAll(round)
					return
				}
				for _, m := range round {
					x.Send(m.To, m)
				}
			}
			// One deadline per round, not a timer per message, so the
			// loop measures the transport and not the benchmark.
			wait := func() {
				deadline := time.NewTimer(waitLimit)
				defer deadline.Stop()
				for _, y := range ys {
					for range v.elections {
						select {
						case <-y.Inbound():
						case <-deadline.C:
							b.Fatalf("round incomplete: node %d stats %+v", y.cfg.Self, y.Stats())
						}
					}
				}
			}
			send() // open the streams before measuring
			wait()
			before, cpu0 := x.Stats(), cpuTime(b)
			b.ResetTimer()
			for range b.N {
				send()
				wait()
			}
			b.StopTimer()
			after, cpu := x.Stats(), cpuTime(b)-cpu0
			if len(after.Dropped) != 0 {
				b.Fatalf("dropped %v", after.Dropped)
			}
			n := float64(b.N)
			b.ReportMetric(float64(after.FramesSent-before.FramesSent)/n, "frames/round")
			b.ReportMetric(float64(after.Writes-before.Writes)/n, "writes/round")
			b.ReportMetric(float64(after.BytesSent-before.BytesSent)/n, "bytes/round")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/round")
		})
	}
}
