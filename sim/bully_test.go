package sim_test

import (
	"fmt"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/sim"
)

func bullyFactory(noPreempt bool) sim.Factory {
	return func(nc sim.NodeConfig) (protocols.Protocol, error) {
		return bully.New(bully.Config{
			ID: nc.Self.ID, Members: nc.Members,
			HeartbeatInterval: nc.HeartbeatInterval, ElectionTimeout: nc.ElectionTimeout,
			NoPreempt: noPreempt, HardState: nc.HardState, Now: nc.Now, Rand: nc.Rand,
		})
	}
}

// Bully's own assumptions (highestAssumptions): after the faults stop the
// highest id leads, known to every node, within the liveness bound.
func TestBullyAssumptions(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		t.Run(fmt.Sprintf("preempt=%v", !noPreempt), func(t *testing.T) {
			check := highestLeads
			if noPreempt {
				// A recovered higher id follows the healthy leader by
				// design; only agreement is required.
				check = nil
			}
			st := runHighestSchedules(t, highestSchedules, bullyFactory(noPreempt), highestAssumptions, check)
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
func TestBullyPartitions(t *testing.T) {
	for _, noPreempt := range []bool{false, true} {
		t.Run(fmt.Sprintf("preempt=%v", !noPreempt), func(t *testing.T) {
			st := runHighestSchedules(t, highestSchedules, bullyFactory(noPreempt), highestAllFaults, nil)
			checkEveryFaultInjected(t, st)
		})
	}
}

// Without preemption a recovered higher id follows the healthy leader, so
// the highest-id check must catch some schedule: evidence the check is
// not vacuous.
func TestBullyHighestCheckHasTeeth(t *testing.T) {
	found := ""
	for i := range 300 {
		c, f := capture(bullyFactory(true))
		o := sim.Options{Factory: f, ElectionTimeout: highestET, Checks: sim.NoLeaseChecks(highestET),
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
