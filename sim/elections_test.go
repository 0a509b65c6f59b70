package sim_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// TestCheckerCatchesShellBugs plants bugs in the simulator's shell, the
// part that stands for the agent's routing of several elections and its
// per-election stores (sim.ShellBugs), and shows a seed of the
// multi-election faults cell on which the checker catches each, while the
// real shell passes the same seed (docs/simulator.md, "Several elections
// per node").
func TestCheckerCatchesShellBugs(t *testing.T) {
	cases := []struct {
		name      string
		bugs      sim.ShellBugs
		seed      uint64
		invariant string
	}{
		// Every election's HardState in one record: a restarted node's
		// bully election starts from another election's, lower, epoch.
		{"every election persisted into one record", sim.ShellBugs{OneRecord: true}, 9103081651828072020, sim.InvEpochMonotonic},
		// A named election's messages handed to the default one, which
		// refuses them: the named elections never agree on a leader.
		{"named elections' messages routed to the default one", sim.ShellBugs{RouteToDefault: true}, 10109092562820482796, sim.InvLiveness},
		// The loop sleeps until the default election's next deadline
		// only: the majority election of other voters misses its
		// heartbeats and loses its leader when an unrelated node pauses.
		{"wake-up computed from the default election only", sim.ShellBugs{WakeForDefault: true}, 6, sim.InvIsolation},
		// core-multi/groups: the follower elections never hear that the
		// node leads the anchor, so nobody may stand in them.
		{"group followers never told the anchor's leadership", sim.ShellBugs{NoGroupLead: true}, 1, sim.InvLiveness},
		// Told that they always lead it, each follower election stands
		// on its own, and the group is not kept together.
		{"group followers stand on their own", sim.ShellBugs{GroupLeadAlways: true}, 1, sim.InvLiveness},
	}
	faults, err := registry.LookupCell("core-multi/faults")
	if err != nil {
		t.Fatal(err)
	}
	groups, err := registry.LookupCell("core-multi/groups")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		c := faults
		if tc.bugs.NoGroupLead || tc.bugs.GroupLeadAlways {
			c = groups
		}
		good, err := c.Options()
		if err != nil {
			t.Fatal(err)
		}
		t.Run(tc.name, func(t *testing.T) {
			buggy := good
			buggy.ShellBugs = tc.bugs
			res, err := sim.Run(buggy, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation == nil || res.Violation.Invariant != tc.invariant {
				t.Fatalf("seed %d: want a %s violation, got %v", tc.seed, tc.invariant, res.Violation)
			}
			t.Logf("caught %s with seed %d: %s", res.Violation.Invariant, tc.seed, res.Violation.Detail)
			res, err = sim.Run(good, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatalf("the real shell fails seed %d too:\n%v", tc.seed, res.Violation)
			}
		})
	}
}

// TestCheckerCatchesLeaderWithoutSession plants majority's
// IneligibleCampaigns in the sessions cell's majority election: a node
// campaigns though no local process holds a session there, and the
// checker catches it leading without one, while the real protocol passes
// the same seed.
func TestCheckerCatchesLeaderWithoutSession(t *testing.T) {
	const seed uint64 = 13023600779318350027
	c, err := registry.LookupCell("core-multi/sessions")
	if err != nil {
		t.Fatal(err)
	}
	good, err := c.Options()
	if err != nil {
		t.Fatal(err)
	}
	buggy := good
	buggy.Elections = slices.Clone(good.Elections)
	lock := buggy.Elections[0].Core
	buggy.Elections[0].Core = func(nc sim.NodeConfig) (core.Config, error) {
		cc, err := lock(nc)
		cc.Election.MajorityUnsafe.IneligibleCampaigns = true
		return cc, err
	}
	res, err := sim.Run(buggy, seed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation == nil || res.Violation.Invariant != sim.InvSession {
		t.Fatalf("seed %d: want a %s violation, got %v", seed, sim.InvSession, res.Violation)
	}
	t.Logf("caught %s with seed %d: %s", res.Violation.Invariant, seed, res.Violation.Detail)
	if res, err = sim.Run(good, seed); err != nil {
		t.Fatal(err)
	} else if res.Violation != nil {
		t.Fatalf("the real protocol fails seed %d too:\n%v", seed, res.Violation)
	}
}

// TestMultiElectionRoutes checks, on one run of each multi-election cell,
// that every named election was elected, its messages went out named and
// were delivered, and each election persisted its own state: a run in
// which the named elections never spoke would pass every safety check.
func TestMultiElectionRoutes(t *testing.T) {
	for _, cell := range []string{"core-multi/faults", "core-multi/sessions"} {
		c, err := registry.LookupCell(cell)
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.Options()
		if err != nil {
			t.Fatal(err)
		}
		var trace strings.Builder
		o.Trace = &trace
		res, err := sim.Run(o, 11)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("%s: %v", cell, res.Violation)
		}
		for _, e := range o.Elections {
			if !strings.Contains(trace.String(), "recv  "+e.Name+": ") {
				t.Errorf("%s: no message of election %s was delivered", cell, e.Name)
			}
			for _, what := range []string{"persist", "LEADER", "LIVE"} {
				if !regexp.MustCompile(`\[` + e.Name + `\] n\d+ +` + what + ` `).MatchString(trace.String()) {
					t.Errorf("%s: the trace has no %s line of election %s", cell, what, e.Name)
				}
			}
		}
	}
}

// TestSessionLeaderLeaseWait replays the core-multi/sessions schedule of
// the first soak that reported "became leader of election lock while it
// held no session" for n6, which won its campaign for term 1 holding a
// session, whose session expired while it waited out the lease a new
// majority leader must wait for, and which then published leading: the
// hand-over window, not leadership given without a session. The check
// now lets a node that held a session when it campaigned for the term
// publish leading it.
func TestSessionLeaderLeaseWait(t *testing.T) {
	replayCell(t, "core-multi/sessions", 1515778446599438985)
}

// TestIsolationWindowWaitsForCalm replays the core-multi/faults schedule
// in which node n7 crashed 13 ms after a slowed network was restored: the
// leader of election quorum (voters n5, n6, n7) still waited on n6's
// answers sent slowed, its lease lapsed, and the isolation check blamed
// n7's crash. The window now opens only when no slowed or long-delayed
// message is in flight and an election timeout has passed since the last
// fault, undo or heal.
func TestIsolationWindowWaitsForCalm(t *testing.T) {
	replayCell(t, "core-multi/faults", 18005499568826774021)
}
