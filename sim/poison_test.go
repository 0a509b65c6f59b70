package sim_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// TestPoisonedTermsAndEpochs adds the poison nemesis to random schedules of
// every protocol: a member sends the largest accepted and absurd terms and
// epochs during the fault phase. Every invariant, liveness included, must
// hold: nothing wraps, nothing goes back, the cluster elects after the
// heal. Before the ceiling, 2^64−2 wrapped the next term and liveness
// failed.
func TestPoisonedTermsAndEpochs(t *testing.T) {
	racetest.SkipSampledSchedules(t)
	runs := 60
	if testing.Short() || racetest.Enabled {
		runs = 10 // the race detector slows the simulator some tenfold
	}
	for _, name := range registry.Names() {
		o, err := registry.Options(name)
		if err != nil {
			t.Fatal(err)
		}
		var sent int64
		for i := range runs {
			seed := sim.ScheduleSeed(1313, i)
			rng := rand.New(rand.NewPCG(seed, 13))
			s := sim.RandomSchedule(rng, o)
			for j, v := range sim.PoisonValues {
				// Half the runs send only the accepted values: liveness must
				// hold after the cluster adopted them, not only after
				// refusing the absurd ones.
				if i%2 == 0 && v > protocols.MaxAccepted {
					continue
				}
				at := time.Duration(j+1) * s.FaultPhase / time.Duration(len(sim.PoisonValues)+2)
				s.Actions = append(s.Actions, sim.Action{At: at, Kind: sim.FaultPoison, Target: sim.TargetRandom, Value: v})
			}
			slices.SortStableFunc(s.Actions, func(a, b sim.Action) int { return int(a.At - b.At) })
			res, err := sim.RunSchedule(o, seed, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatalf("%s: %v", name, res.Violation)
			}
			sent += res.Stats.Faults[sim.FaultPoison]
		}
		// A crashed or paused target sends nothing; most must have sent.
		if sent < int64(runs) {
			t.Fatalf("%s: only %d poisons sent in %d runs", name, sent, runs)
		}
	}
}
