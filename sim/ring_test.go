package sim_test

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/sim/registry"
)

// The ring's own assumptions (highestAssumptions): after the faults stop
// the highest id leads, known to every node, within the liveness bound.
func TestRingAssumptions(t *testing.T) {
	for _, alg := range []string{ring.AlgLCR, ring.AlgHS, ring.AlgPeterson} {
		t.Run(alg, func(t *testing.T) {
			st := runHighestSchedules(t, highestSchedules, registry.Ring(alg), highestAssumptions, highestLeads)
			if st.Elections < int64(st.Schedules) {
				t.Errorf("only %d elections in %d schedules", st.Elections, st.Schedules)
			}
		})
	}
}

// Every fault, partitions and resignations included: two leaders may
// coexist, but never with the same epoch, epochs never go back, the fenced
// resource never accepts one epoch from two leaders, and after the heal one
// leader is agreed on.
func TestRingPartitions(t *testing.T) {
	for _, alg := range []string{ring.AlgLCR, ring.AlgHS, ring.AlgPeterson} {
		t.Run(alg, func(t *testing.T) {
			st := runHighestSchedules(t, highestSchedules, registry.Ring(alg), highestAllFaults, nil)
			checkEveryFaultInjected(t, st)
		})
	}
}
