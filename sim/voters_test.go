package sim_test

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// voterSchedules is what CI runs with voter changes; the soak command
// (-voters) runs many more.
const voterSchedules = 2000

// voterOptions runs majority with two observers and voter changes among
// the faults (docs/voters.md).
func voterOptions(t *testing.T, unsafe majority.Unsafe) sim.Options {
	t.Helper()
	o := majorityOptions(t, unsafe)
	// Voter changes drawn three times as often as each other fault.
	o.Faults = append(sim.VoterFaults(), sim.FaultVoterChange, sim.FaultVoterChange)
	o.Observers = 2
	return o
}

func TestMajorityVoterChangeSchedules(t *testing.T) {
	o := voterOptions(t, majority.Unsafe{})
	if replay(t, o) {
		return
	}
	n := voterSchedules
	if testing.Short() || racetest.Enabled {
		n = voterSchedules / 10
	}
	st, bad, err := sim.RunMany(o, sim.Batch{Base: 14, Schedules: n, MaxViolations: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range bad {
		t.Errorf("majority violated %s with voter changes; replay with: go test ./sim -run TestMajorityVoterChangeSchedules -seed %d -v\n%v", r.Violation.Invariant, r.Seed, r.Violation)
	}
	t.Logf("\n%s", st)
	if len(bad) == 0 && st.Schedules != n {
		t.Fatalf("ran %d schedules, want %d", st.Schedules, n)
	}
	if st.Faults[sim.FaultVoterChange] < int64(n) {
		t.Errorf("only %d voter changes accepted in %d schedules", st.Faults[sim.FaultVoterChange], n)
	}
}

// TestCheckerCatchesBrokenVoterChanges switches on each planted bug of the
// configuration protocol and shows that a seed exposes it.
func TestCheckerCatchesBrokenVoterChanges(t *testing.T) {
	cases := []struct {
		name   string
		unsafe majority.Unsafe
		limit  int
	}{
		{"vote for an older configuration", majority.Unsafe{VoteForOlderConfig: true}, 2000},
		{"change before committing the inherited configuration", majority.Unsafe{ChangeBeforeInheritedCommit: true}, 2000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := voterOptions(t, c.unsafe)
			// Safety, not liveness: a bug that only stalls the cluster
			// does not count as caught.
			o.Checks.LivenessBound = 0
			_, bad, err := sim.RunMany(o, sim.Batch{Base: 141, Schedules: c.limit, MaxViolations: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) == 0 {
				t.Fatalf("%s: no violation in %d schedules", c.name, c.limit)
			}
			v := bad[0].Violation
			t.Logf("caught %s with seed %d: %s", v.Invariant, v.Seed, v.Detail)
		})
	}
}

// mismatchedFactory is majority where n1's config file lists only itself
// (config.example.toml's value) and everyone else's lists all three.
func mismatchedFactory(c sim.NodeConfig) (protocols.Protocol, error) {
	voters := []string{"n1", "n2", "n3"}
	if c.Self.ID == 1 {
		voters = []string{"n1"}
	}
	return majority.New(majority.Config{
		ID: c.Self.ID, Members: c.Members, Voters: voters,
		ElectionTimeout: c.ElectionTimeout, HeartbeatInterval: c.HeartbeatInterval,
		PreVote: true, CheckQuorum: true, MaxClockDrift: c.MaxClockDrift,
		HardState: c.HardState, Now: c.Now, Rand: c.Rand,
	})
}

// TestMismatchedBootstrapLists is the scenario: n1 with voters
// ["n1"], n2 and n3 with all three, and n1 partitioned off again and again
// (and crashed, so that it restarts from its state record). Before voter
// lists were replicated n1 and n2 both led epoch 1; now no epoch ever has
// two leaders.
func TestMismatchedBootstrapLists(t *testing.T) {
	o, err := registry.Options("majority")
	if err != nil {
		t.Fatal(err)
	}
	o.Factory = mismatchedFactory
	et := o.ElectionTimeout
	seeds := 300
	if testing.Short() || racetest.Enabled {
		seeds = 30
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		s := sim.Schedule{Nodes: 3, FaultPhase: 60 * et, MaxDelay: et / 20}
		for i := range 10 {
			at := time.Duration(i)*6*et + time.Duration(seed%7)*et/3
			kind := sim.FaultIsolateLeader
			if i%3 == 2 {
				kind = sim.FaultCrash
			}
			s.Actions = append(s.Actions, sim.Action{At: at, Kind: kind, Target: 0, Duration: 4 * et})
		}
		res, err := sim.RunSchedule(o, seed, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("mismatched voter lists, seed %d:\n%v", seed, res.Violation)
		}
	}
}

// restartLeaseSeed replays, with voterOptions, the lease violation that a
// sole voter campaigning at once after a restart caused: n3, the only voter
// of [n3], acknowledged n2 (the leader that removed itself) in term 2,
// crashed, restarted and took a lease 5 ms later while n2's still ran.
const restartLeaseSeed = 2112928646504161275

// TestRestartedSoleVoterWaitsOutLeases replays restartLeaseSeed: clean with
// the restart wait, and the same seed violates the lease with the wait
// switched off (the planted RestartForgetsLease), so the test can fail.
func TestRestartedSoleVoterWaitsOutLeases(t *testing.T) {
	res, err := sim.Run(voterOptions(t, majority.Unsafe{}), restartLeaseSeed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation != nil {
		t.Errorf("seed %d violates with the restart wait:\n%v", restartLeaseSeed, res.Violation)
	}
	res, err = sim.Run(voterOptions(t, majority.Unsafe{RestartForgetsLease: true}), restartLeaseSeed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation == nil || res.Violation.Invariant != sim.InvLease {
		t.Errorf("seed %d with the restart wait off: want a lease violation, got %v", restartLeaseSeed, res.Violation)
	}
}
