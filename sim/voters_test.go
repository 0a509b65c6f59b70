package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/core"
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
	racetest.SkipSampledSchedules(t)
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

// restartLeaseSeed and restartLeaseSchedule replay, with voterOptions,
// the lease violation that a sole voter campaigning at once after a restart
// caused: n3, the only voter of [n3], acknowledged n2 (the leader that
// removed itself) in term 2, crashed, restarted and took a lease 5 ms later
// while n2's still ran. The schedule is also written out (it is what
// RandomSchedule drew for the seed) and run with restartLeaseRunSeed for
// what it leaves open, so that the test replays the same faults on any
// commit, whatever the generator draws there: it violates on d5fcb48 and
// on its parent, which the random seed does not reach. The run seed was
// redrawn (497 before) when majority's quorum check moved onto the
// heartbeat: the leader's timing changed, and 497 no longer reached the
// hole with both rules off; 823 does, and is clean with either rule.
const (
	restartLeaseSeed    = 2112928646504161275
	restartLeaseRunSeed = 823
)

var restartLeaseSchedule = sim.Schedule{
	Nodes: 5, FaultPhase: 3808763515,
	Actions: []sim.Action{
		{At: 273267625, Kind: sim.FaultSplit, Target: sim.TargetRandom, Duration: 2018065880},
		{At: 704314399, Kind: sim.FaultVoterChange, Target: sim.TargetLeader},
		{At: 1185186165, Kind: sim.FaultVoterChange, Target: sim.TargetLeader},
		{At: 1575297615, Kind: sim.FaultCrash, Target: sim.TargetNextVoteGrant, Duration: 47054369},
		{At: 1936882243, Kind: sim.FaultIsolateLeader, Target: sim.TargetLeader, Duration: 2008726526},
		{At: 2411267876, Kind: sim.FaultSplit, Target: sim.TargetRandom, Duration: 516127437},
		{At: 2879402249, Kind: sim.FaultOneWay, Target: sim.TargetRandom, Duration: 1231034236},
		{At: 3177189709, Kind: sim.FaultIsolateLeader, Target: sim.TargetLeader, Duration: 445928865},
		{At: 3359260865, Kind: sim.FaultVoterChange, Target: sim.TargetLeader},
		{At: 3508840288, Kind: sim.FaultPause, Target: sim.TargetLeader, Duration: 183772249},
		{At: 3728764248, Kind: sim.FaultCrash, Target: sim.TargetLeader, Duration: 92909978},
	},
	DropProb: 0.0736243822993415, DupProb: 0.018132338439939555,
	MinDelay: 705510, MaxDelay: 7403534,
	ClockRates: []float64{1.002752891793731, 1.0029520121874982, 0.9961961663049584, 1.001522250964076, 1.005},
}

// TestRestartedSoleVoterWaitsOutLeases replays the seed, and its schedule
// written out. Two rules now close the hole, each on its own: the restart
// wait, and a member outside the voters learning from their messages that
// the configuration is committed (so the removed leader never campaigns
// into the lease). The test runs with both, with each alone (clean), and
// with both switched off (the planted RestartForgetsLease and
// IgnoreHeldConfig, the code before either), which must violate the
// lease, so the test can fail.
func TestRestartedSoleVoterWaitsOutLeases(t *testing.T) {
	run := func(u majority.Unsafe, explicit bool) *sim.Violation {
		t.Helper()
		var res sim.Result
		var err error
		if explicit {
			res, err = sim.RunSchedule(voterOptions(t, u), restartLeaseRunSeed, restartLeaseSchedule)
		} else {
			res, err = sim.Run(voterOptions(t, u), restartLeaseSeed)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res.Violation
	}
	for _, explicit := range []bool{false, true} {
		for _, u := range []majority.Unsafe{{}, {RestartForgetsLease: true}, {IgnoreHeldConfig: true}} {
			if v := run(u, explicit); v != nil {
				t.Errorf("seed %d (schedule written out: %v, planted %+v) violates:\n%v", restartLeaseSeed, explicit, u, v)
			}
		}
		if v := run(majority.Unsafe{RestartForgetsLease: true, IgnoreHeldConfig: true}, explicit); v == nil || v.Invariant != sim.InvLease {
			t.Errorf("seed %d (schedule written out: %v) with both rules off: want a lease violation, got %v", restartLeaseSeed, explicit, v)
		}
	}
}

// TestLoneSeedThenClusterCoreMode is the README's lone-n1-then-cluster
// path in core mode: n1's config lists only itself and it starts alone;
// n2 and n3, whose lists name all three, start 1.5 s later (crashed at
// time zero with nothing persisted) and join through n1. n1's cluster
// leaves them out, so they
// must observe n1 and, once they learned its configuration, never send a
// (pre-)vote request again: the run goes on 30 s past liveness and the
// trace of that time must hold none.
func TestLoneSeedThenClusterCoreMode(t *testing.T) {
	o, err := registry.Options("core-majority")
	if err != nil {
		t.Fatal(err)
	}
	base := registry.Core(core.ProtocolMajority, "", core.Unsafe{})
	o.Core = func(c sim.NodeConfig) (core.Config, error) {
		cfg, err := base(c)
		if c.Self.ID == 1 {
			cfg.Election.Voters = []string{"n1"}
		}
		return cfg, err
	}
	o.Observers = 0
	o.Checks.FailoverBound = 0 // only n1 votes: nobody could take over
	o.Checks.Settle = 30 * time.Second
	seeds := 20
	if testing.Short() || racetest.Enabled {
		seeds = 3
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		var trace strings.Builder
		o.Trace = &trace
		// n2 and n3 join through n1 (gossip.join), so gossip introduces
		// n1 to them before they meet each other: a bridge through n1
		// until they have had time to learn it (the model's join lag is
		// under 1 s).
		s := sim.Schedule{Nodes: 3, FaultPhase: 4 * time.Second, MaxDelay: 5 * time.Millisecond, Actions: []sim.Action{
			{At: 0, Kind: sim.FaultBridge, Target: 0, Duration: 4 * time.Second},
			{At: 0, Kind: sim.FaultCrash, Target: 1, Duration: 1500 * time.Millisecond},
			{At: 0, Kind: sim.FaultCrash, Target: 2, Duration: 1500 * time.Millisecond},
		}}
		res, err := sim.RunSchedule(o, seed, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("seed %d:\n%v", seed, res.Violation)
		}
		late := 0
		for _, line := range strings.Split(trace.String(), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || f[2] != "send" || (f[1] != "n2" && f[1] != "n3") || (f[4] != "PreVote" && f[4] != "Vote") {
				continue
			}
			at, err := time.ParseDuration(f[0])
			if err == nil && at > res.End-30*time.Second {
				late++
			}
		}
		if late != 0 {
			t.Errorf("seed %d: n2 and n3 sent %d (pre-)vote requests in the 30 s after liveness, want 0", seed, late)
		}
	}
}
