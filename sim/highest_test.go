package sim_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/sim"
)

// The randomised fault schedules of the highest-id protocols (bully and
// ring), which share the way they run them and what they check after the
// heal (bully_test.go, ring_test.go).
const (
	// highestSchedules is how many schedules a test runs without the race
	// detector; under -short a tenth.
	highestSchedules = 2000
	// highestET is the runs' election timeout; the liveness bound is 30 of
	// them after the heal.
	highestET = 100 * time.Millisecond
	// highestSettle is how long a run goes on after liveness (sim's
	// Checks.Settle) before highestLeads looks: the preempt delay the
	// registry gives bully and ring (3 ET) and ten more for the takeover.
	highestSettle = 13 * highestET
)

// captured remembers the newest instance a factory built per node id, so
// that after a run the test can ask who each live node follows.
type captured struct {
	mu    sync.Mutex
	nodes map[protocols.ID]protocols.Protocol
}

// capture wraps f so that the instances it builds are remembered.
func capture(f sim.Factory) (*captured, sim.Factory) {
	c := &captured{nodes: map[protocols.ID]protocols.Protocol{}}
	return c, func(nc sim.NodeConfig) (protocols.Protocol, error) {
		n, err := f(nc)
		if err == nil {
			c.mu.Lock()
			c.nodes[nc.Self.ID] = n
			c.mu.Unlock()
		}
		return n, err
	}
}

// finalCheck returns a complaint about a run's final state, or "".
type finalCheck func(res sim.Result, nodes map[protocols.ID]protocols.Protocol) string

// runHighestSchedules runs count schedules (sim.ScheduleSeed(1, i)) of the
// protocol f builds on a worker pool, each with the options opts makes of
// its own capturing factory, and fails t on every error, violation and
// complaint of check (nil checks nothing beyond the simulator's own
// checks). It returns the summed statistics.
func runHighestSchedules(t *testing.T, count int, f sim.Factory, opts func(f sim.Factory) sim.Options, check finalCheck) sim.Stats {
	t.Helper()
	racetest.SkipSampledSchedules(t)
	if testing.Short() {
		// A sample under -short (the fast tier); the schedules matrix
		// runs these fault sets in full.
		count /= 10
	}
	var (
		mu    sync.Mutex
		total sim.Stats
		fails []string
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				c, cf := capture(f)
				seed := sim.ScheduleSeed(1, i)
				res, err := sim.Run(opts(cf), seed)
				msg := ""
				switch {
				case err != nil:
					msg = err.Error()
				case res.Violation != nil:
					msg = res.Violation.Error()
				case check != nil:
					msg = check(res, c.nodes)
				}
				mu.Lock()
				total.Add(res.Stats)
				if msg != "" {
					fails = append(fails, fmt.Sprintf("seed %d: %s", seed, msg))
				}
				mu.Unlock()
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, f := range fails {
		if i == 3 {
			t.Errorf("... and %d more", len(fails)-3)
			break
		}
		t.Error(f)
	}
	t.Logf("%d failing schedules\n%s", len(fails), total)
	return total
}

// highestLeads checks that the run reached agreement and that the leader is
// the highest id (after the heal every node is live again, and the run goes
// on for highestSettle, so a restarted highest id is past its preempt
// delay).
func highestLeads(res sim.Result, nodes map[protocols.ID]protocols.Protocol) string {
	if res.Recovery < 0 {
		return "no agreement on a leader after the heal"
	}
	top := protocols.ID(res.Schedule.Nodes)
	if len(nodes) != res.Schedule.Nodes {
		return fmt.Sprintf("captured %d instances of %d nodes", len(nodes), res.Schedule.Nodes)
	}
	for id, n := range nodes {
		if s := n.Status(0); s.Leader != top {
			return fmt.Sprintf("n%d follows %d, want highest id %d", id, s.Leader, top)
		}
	}
	return ""
}

// highestAssumptions are the faults the highest-id protocols are built to
// survive: fixed membership, no partitions, crashes detected (the
// simulator's suspicion and gossip models), plus pauses, a slow network,
// message loss and duplication.
func highestAssumptions(f sim.Factory) sim.Options {
	o := sim.Options{Factory: f, ElectionTimeout: highestET, Checks: sim.NoLeaseChecks(highestET)}
	o.Faults = []sim.FaultKind{sim.FaultCrash, sim.FaultPause, sim.FaultSlowNetwork}
	o.Checks.Settle = highestSettle
	return o
}

// highestAllFaults schedules every fault, partitions and resignations
// included.
func highestAllFaults(f sim.Factory) sim.Options {
	return sim.Options{Factory: f, ElectionTimeout: highestET, Checks: sim.NoLeaseChecks(highestET)}
}

// checkEveryFaultInjected fails t when some scheduled fault kind never ran:
// the schedules would then test less than they claim.
func checkEveryFaultInjected(t *testing.T, st sim.Stats) {
	t.Helper()
	for _, k := range sim.ScheduledFaults() {
		if st.Faults[k] == 0 {
			t.Errorf("no %s fault injected", k)
		}
	}
}
