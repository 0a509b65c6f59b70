package bully_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/sim"
)

const (
	simSchedules = 2000
	// simET is the runs' election timeout; the liveness bound is 30 of
	// them after the heal.
	simET = 100 * time.Millisecond
)

// captured remembers the newest instance the factory built per node id, so
// that after a run the test can ask who each live node follows.
type captured struct {
	mu    sync.Mutex
	nodes map[protocols.ID]protocols.Protocol
}

func (c *captured) factory(noPreempt bool) sim.Factory {
	return func(nc sim.NodeConfig) (protocols.Protocol, error) {
		n, err := bully.New(bully.Config{
			ID: nc.Self.ID, Members: nc.Members,
			HeartbeatInterval: nc.HeartbeatInterval, ElectionTimeout: nc.ElectionTimeout,
			NoPreempt: noPreempt, HardState: nc.HardState, Now: nc.Now, Rand: nc.Rand,
		})
		if err == nil {
			c.mu.Lock()
			c.nodes[nc.Self.ID] = n
			c.mu.Unlock()
		}
		return n, err
	}
}

// runSchedules runs count schedules of sim on a worker pool. Each run gets
// its own factory so its instances can be inspected when it ends; check
// returns a complaint about the final state, or "".
func runSchedules(t *testing.T, count int, opts func(f sim.Factory) sim.Options, noPreempt bool,
	check func(res sim.Result, nodes map[protocols.ID]protocols.Protocol) string) sim.Stats {
	t.Helper()
	if testing.Short() || racetest.Enabled {
		// A sample under -race or -short; scripts/test also runs the full
		// count without the race detector.
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
				c := &captured{nodes: map[protocols.ID]protocols.Protocol{}}
				seed := sim.ScheduleSeed(1, i)
				res, err := sim.Run(opts(c.factory(noPreempt)), seed)
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
// the highest id (after the heal every node is live again).
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

// Bully's own assumptions: fixed membership, no partitions, crashes
// detected (the simulator's suspicion and gossip models), plus pauses, a
// slow network, message loss and duplication. After the faults stop the
// highest id leads, known to every node, within the liveness bound.
func TestSimAssumptions(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		t.Run(fmt.Sprintf("preempt=%v", !noPreempt), func(t *testing.T) {
			check := highestLeads
			if noPreempt {
				// A recovered higher id follows the healthy leader by
				// design; only agreement is required.
				check = nil
			}
			st := runSchedules(t, simSchedules, func(f sim.Factory) sim.Options {
				o := sim.Options{Factory: f, ElectionTimeout: simET, Checks: sim.NoLeaseChecks(simET)}
				o.Faults = []sim.FaultKind{sim.FaultCrash, sim.FaultPause, sim.FaultSlowNetwork}
				return o
			}, noPreempt, check)
			if st.Elections < int64(st.Schedules) {
				t.Errorf("only %d elections in %d schedules", st.Elections, st.Schedules)
			}
		})
	}
}

// Every fault, partitions and resignations included: two coordinators may
// coexist, but never with the same epoch, epochs never go back, the fenced
// resource never accepts one epoch from two leaders, and after the heal one
// leader is agreed on.
func TestSimPartitions(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		t.Run(fmt.Sprintf("preempt=%v", !noPreempt), func(t *testing.T) {
			st := runSchedules(t, simSchedules, func(f sim.Factory) sim.Options {
				return sim.Options{Factory: f, ElectionTimeout: simET, Checks: sim.NoLeaseChecks(simET)}
			}, noPreempt, nil)
			for _, k := range sim.ScheduledFaults() {
				if st.Faults[k] == 0 {
					t.Errorf("no %s fault injected", k)
				}
			}
		})
	}
}

// Without preemption a recovered higher id follows the healthy leader, so
// the highest-id check must catch some schedule: evidence the check is
// not vacuous.
func TestSimHighestCheckHasTeeth(t *testing.T) {
	found := ""
	for i := range 300 {
		c := &captured{nodes: map[protocols.ID]protocols.Protocol{}}
		o := sim.Options{Factory: c.factory(true), ElectionTimeout: simET, Checks: sim.NoLeaseChecks(simET),
			Faults: []sim.FaultKind{sim.FaultCrash}}
		res, err := sim.Run(o, sim.ScheduleSeed(5, i))
		if err != nil || res.Violation != nil {
			t.Fatalf("seed %d: %v %v", res.Seed, err, res.Violation)
		}
		if found = highestLeads(res, c.nodes); found != "" {
			t.Logf("schedule %d: %s", i, found)
			return
		}
	}
	t.Fatal("NoPreempt never left a lower id leading: highestLeads checks nothing")
}
