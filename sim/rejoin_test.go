package sim_test

import (
	"slices"
	"testing"

	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// TestCheckerCatchesNoRejoin turns the agent's rejoin glue off in the
// simulator's shell (sim.ShellBugs.NoRejoin) and shows seeds of the
// cells with the address faults on which liveness after the heal fails,
// while the real shell passes them: a wiped voter nobody joins knows
// nobody for good, and after a seed split the members the seed never
// knew cannot reach the two that joined it (docs/simulator.md, "The
// membership model").
func TestCheckerCatchesNoRejoin(t *testing.T) {
	cases := []struct {
		name string
		cell string
		seed uint64
		// wiped and split: the faults the seed injects.
		wiped, split int64
	}{
		{"wiped voter, majority", "core-majority/faults", 114, 1, 0},
		{"wiped voter, bully", "core-bully/faults", 84, 1, 0},
		{"seed split, majority", "core-majority/faults", 89, 0, 1},
		{"seed split, bully", "core-bully/faults", 35, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := registry.LookupCell(tc.cell)
			if err != nil {
				t.Fatal(err)
			}
			good, err := c.Options()
			if err != nil {
				t.Fatal(err)
			}
			if tc.wiped > 0 && !slices.Contains(good.Faults, sim.FaultWipedRestart) {
				// core-bully/faults leaves wiped restarts out (open
				// finding 17); the planted bug is still shown with them.
				good.Faults = append(slices.Clone(good.Faults), sim.FaultWipedRestart)
			}
			buggy := good
			buggy.ShellBugs.NoRejoin = true
			res, err := sim.Run(buggy, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation == nil || res.Violation.Invariant != sim.InvLiveness {
				t.Fatalf("seed %d: want a %s violation, got %v", tc.seed, sim.InvLiveness, res.Violation)
			}
			if w, s := res.Stats.Faults[sim.FaultWipedRestart], res.Stats.Faults[sim.FaultSeedSplit]; w != tc.wiped || s != tc.split {
				t.Fatalf("seed %d injected %d wiped restarts and %d seed splits, want %d and %d", tc.seed, w, s, tc.wiped, tc.split)
			}
			t.Logf("caught %s with seed %d: %s", res.Violation.Invariant, tc.seed, res.Violation.Detail)
			if res, err = sim.Run(good, tc.seed); err != nil {
				t.Fatal(err)
			} else if res.Violation != nil {
				t.Fatalf("the real shell fails seed %d too:\n%v", tc.seed, res.Violation)
			}
		})
	}
}

// TestAddressFaultRegressions replays the seeds that failed while the
// address faults were built, most drawn with probability one half then.
func TestAddressFaultRegressions(t *testing.T) {
	cases := []struct {
		cell string
		seed uint64
		why  string
		odds int // Options.AddressFaultOdds when it failed
	}{
		// n5 wiped while n6 was away: the others' live count never
		// exceeded six, so none was short and none joined n5, whom
		// gossip said alive and the transport did not reach. Fixed in
		// core.Rejoin: such a member makes an agent short.
		{"core-majority/faults", 12264890657478899170, "a wiped voter the live counts missed", 2},
		// A wiped observer: nobody's transport probes it, so nobody
		// joins it. The address faults now strike voters only.
		{"core-majority/faults", 15784286278853525526, "a wiped observer", 2},
		// n2 learned the wiped n1's address from n3's push-pull but no
		// state of it (the model taught addresses only), so it never
		// listed n1 and never joined it. A push-pull now carries the
		// state its answerer heard.
		{"core-bully/faults", 16607766319720050516, "an address learned without a state", 2},
		// n1 wiped 27 ms into the run, before anyone had heard its
		// state. A push-pull now carries both ends' own states, and every
		// start joins the snapshot.
		{"core-bully/faults", 1777081367656420096, "wiped before anyone heard of it", 2},
		// A seed split (8149873743192511815 under an earlier draw of
		// the faults; this seed fails the same way): the seed's start
		// join failed across a partition, and once it learned the two by
		// their own news nobody was short, so they never learned each
		// other. The seed's gossip now spreads a member it just learned
		// to the nodes it knows (hearOf). Drawn at odds 4.
		{"core-bully/faults", 6370725167673141472, "the two never told of each other", 4},
		// Finding 17: n1 left gracefully, crashed, then was wiped; the
		// others had restarted while it was away, so neither had seen it
		// live since its start, neither was short, and nobody joined it.
		// core.Rejoin now counts the snapshot's members as seen for the
		// window after a start.
		{"core-bully/faults", 7441392605979339230, "a wiped voter the others never saw live", 4},
		// The same, n2 wiped while the leader was isolated and pause
		// groups came and went.
		{"core-bully/faults", 4782510863022677437, "a wiped voter among pause groups", 4},
		// The same, n1 crashed, restarted, then wiped.
		{"core-bully/faults", 15157176702275459580, "a wiped voter after a restart", 4},
		// Not a rejoin bug: the membership model's scan handed n7 a
		// member's death, which finished n7's leave and stopped it, and
		// went on handing the stopped node the next member (a nil core,
		// a panic). Found by CI's matrix once wiped restarts were back
		// in this cell.
		{"core-bully/faults", 4869867824245835269, "a leave finished in the middle of a membership scan", 4},
	}
	for _, tc := range cases {
		t.Run(tc.why, func(t *testing.T) {
			c, err := registry.LookupCell(tc.cell)
			if err != nil {
				t.Fatal(err)
			}
			o, err := c.Options()
			if err != nil {
				t.Fatal(err)
			}
			o.AddressFaultOdds = tc.odds
			res, err := sim.Run(o, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatalf("seed %d:\n%v", tc.seed, res.Violation)
			}
			if res.Stats.Faults[sim.FaultWipedRestart]+res.Stats.Faults[sim.FaultSeedSplit] == 0 {
				t.Fatalf("seed %d injected no address fault", tc.seed)
			}
		})
	}
}
