package sim_test

import (
	"testing"

	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// healthSchedules is what CI runs at full count; the soak command runs many
// more (go run ./sim/cmd/soak -health).
const healthSchedules = 2000

func healthOptions(t *testing.T, unsafe majority.Unsafe) sim.Options {
	t.Helper()
	o := majorityOptions(t, unsafe)
	o.Faults = sim.HealthFaults()
	o.Checks.Health = true
	return o
}

// TestMajorityHealthSchedules runs majority under the health nemesis:
// flapping eligibility, maintenance in the middle of elections, preferred
// nodes, and preferred nodes crashing mid-transfer.
func TestMajorityHealthSchedules(t *testing.T) {
	racetest.SkipSampledSchedules(t)
	o := healthOptions(t, majority.Unsafe{})
	if replay(t, o) {
		return
	}
	n := healthSchedules
	if testing.Short() || racetest.Enabled {
		n = 200
	}
	st, bad, err := sim.RunMany(o, sim.Batch{Base: 15, Schedules: n, MaxViolations: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range bad {
		t.Errorf("majority violated %s under health faults; replay with: go test ./sim -run TestMajorityHealthSchedules -seed %d -v\n%v", r.Violation.Invariant, r.Seed, r.Violation)
	}
	t.Logf("\n%s", st)
	if len(bad) == 0 && st.Schedules != n {
		t.Fatalf("ran %d schedules, want %d", st.Schedules, n)
	}
	for _, k := range o.Faults {
		if st.Faults[k] == 0 {
			t.Errorf("no %s fault injected", k)
		}
	}
}

// TestCheckerCatchesIneligibleCampaign: with the planted bug "a failing
// agent may campaign" the checker finds a node given leadership while
// ineligible.
func TestCheckerCatchesIneligibleCampaign(t *testing.T) {
	o := healthOptions(t, majority.Unsafe{IneligibleCampaigns: true})
	_, bad, err := sim.RunMany(o, sim.Batch{Base: 99, Schedules: 200, MaxViolations: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) == 0 {
		t.Fatal("a failing agent may campaign: no violation in 200 schedules")
	}
	v := bad[0].Violation
	if v.Invariant != sim.InvHealth {
		t.Fatalf("caught %s, want %s:\n%v", v.Invariant, sim.InvHealth, v)
	}
	t.Logf("caught %s with seed %d: %s", v.Invariant, v.Seed, v.Detail)
}

// TestHealthStaleConfigLiveness replays the schedule that found the one
// eligible node unable to win: it had missed the last leader's
// configuration, and every node holding the newer one was ineligible, so
// nobody campaigned with it and the eligible node's requests failed the
// up-to-date check forever (liveness violated 3 s after the heal). Fix: a
// node adopts a newer configuration from a voter that refuses it. The
// 20,000-schedule soak then found the same with the eligible node still
// holding its bootstrap list (index 0): it adopts from there too.
func TestHealthStaleConfigLiveness(t *testing.T) {
	for _, seed := range []uint64{7737770614285211121, 3856421692775740299, 9256161716529699289} {
		res, err := sim.Run(healthOptions(t, majority.Unsafe{}), seed)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Errorf("seed %d violates:\n%v", seed, res.Violation)
		}
	}
}

// preferredSettle is how long bully and ring health schedules go on after
// liveness before the preferred-leader check: the registry's preempt delay
// (3 election timeouts) and ten more for the takeover.
const preferredSettle = 13

// bullyRingHealthOptions are the health nemesis for a bare bully or ring
// built by f, with the schedule's priorities (random: all equal, one
// preferred node, or mixed), and the preferred-leader check after a quiet.
func bullyRingHealthOptions(t *testing.T, name string) sim.Options {
	t.Helper()
	o, err := registry.Options(name)
	if err != nil {
		t.Fatal(err)
	}
	o.Faults = sim.HealthFaults()
	o.Checks.Health = true
	o.Checks.Settle = preferredSettle * o.ElectionTimeout
	o.Checks.Preferred = true
	return o
}

// TestBullyRingHealthSchedules runs bully and ring under the health
// nemesis: an ineligible node abstains from elections (never put forward,
// never given leadership), a leader that turns ineligible resigns, and
// once the heal leaves a node eligible the cluster elects one. Nodes have
// random priorities, preferred nodes crash in the middle of hand-overs and
// restart; after the heal and a quiet the live, eligible node of highest
// rank (priority, id) leads.
func TestBullyRingHealthSchedules(t *testing.T) {
	racetest.SkipSampledSchedules(t)
	n := healthSchedules / 4
	if testing.Short() || racetest.Enabled {
		n = 100
	}
	for _, name := range []string{"bully", "ring", "ring-hs"} {
		t.Run(name, func(t *testing.T) {
			runHealthBatch(t, name, bullyRingHealthOptions(t, name), sim.Batch{Base: 21, Schedules: n, MaxViolations: 3}, "")
		})
	}
}

// TestCheckerCatchesIDsOnly: with the planted bug "compare ids only"
// (priorities ignored) the preferred-leader check finds a cluster led by a
// higher id of lower priority.
func TestCheckerCatchesIDsOnly(t *testing.T) {
	for _, name := range []string{"bully", "ring"} {
		t.Run(name, func(t *testing.T) {
			o := bullyRingHealthOptions(t, name)
			o.Factory = idsOnly(name)
			_, bad, err := sim.RunMany(o, sim.Batch{Base: 99, Schedules: 200, MaxViolations: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) == 0 {
				t.Fatal("compare ids only: no violation in 200 schedules")
			}
			v := bad[0].Violation
			if v.Invariant != sim.InvPreferred {
				t.Fatalf("caught %s, want %s:\n%v", v.Invariant, sim.InvPreferred, v)
			}
			t.Logf("caught %s with seed %d: %s", v.Invariant, v.Seed, v.Detail)
		})
	}
}

// idsOnly builds bully or ring nodes as the registry does, with the
// planted bug Unsafe.IDsOnly.
func idsOnly(name string) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		if name == "bully" {
			return bully.New(bully.Config{
				ID: c.Self.ID, Members: c.Members, ElectionTimeout: c.ElectionTimeout, HeartbeatInterval: c.HeartbeatInterval,
				Candidacy: c.Candidacy, PreemptDelay: 3 * c.ElectionTimeout,
				HardState: c.HardState, Now: c.Now, Rand: c.Rand, Unsafe: bully.Unsafe{IDsOnly: true},
			})
		}
		return ring.New(ring.Config{
			ID: c.Self.ID, Members: c.Members, ElectionTimeout: c.ElectionTimeout, HeartbeatInterval: c.HeartbeatInterval,
			Candidacy: c.Candidacy, PreemptDelay: 3 * c.ElectionTimeout,
			HardState: c.HardState, Now: c.Now, Rand: c.Rand, Unsafe: ring.Unsafe{IDsOnly: true},
		})
	}
}

// TestCoreHealthSchedules runs core-mode bully, ring and ring-hs (core.Node,
// gossip's membership model carrying each member's priority, the agent's
// candidacy path core.Node.SetHealth) under the health nemesis with the
// preferred-leader check. The failover probe is off: the check needs the
// quiet after liveness. Ring's schedules include 12152912330625405863, in
// which a node's stale suspicion of the one eligible member routed that
// member's election round the others for ever until ring stopped routing
// an election message past its own candidate (docs/bully-ring.md).
func TestCoreHealthSchedules(t *testing.T) {
	racetest.SkipSampledSchedules(t)
	for _, name := range []string{"core-bully", "core-ring", "core-ring-hs"} {
		t.Run(name, func(t *testing.T) {
			n := 200
			if testing.Short() || racetest.Enabled {
				n = 40
			}
			runHealthBatch(t, name, coreHealthOptions(t, name), sim.Batch{Base: 5, Schedules: n, MaxViolations: 3},
				"; replay with: go test ./sim -run TestCoreHealthSchedules")
		})
	}
}

// runHealthBatch runs batch b of variant name under the health nemesis
// and fails on any violation (hint follows "under health faults" in the
// message), on a batch cut short, or when no health fault was injected.
func runHealthBatch(t *testing.T, name string, o sim.Options, b sim.Batch, hint string) {
	t.Helper()
	st, bad, err := sim.RunMany(o, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range bad {
		t.Errorf("%s violated %s under health faults%s (seed %d)\n%v", name, r.Violation.Invariant, hint, r.Seed, r.Violation)
	}
	t.Logf("\n%s", st)
	if len(bad) == 0 && st.Schedules != b.Schedules {
		t.Fatalf("ran %d schedules, want %d", st.Schedules, b.Schedules)
	}
	if st.Faults[sim.FaultHealth] == 0 {
		t.Error("no health fault injected")
	}
}

// coreHealthOptions are a core-mode variant's own faults with health
// faults added, the leader-eligible check, and the preferred-leader check
// after a quiet instead of the failover probe.
func coreHealthOptions(t *testing.T, name string) sim.Options {
	t.Helper()
	o, err := registry.Options(name)
	if err != nil {
		t.Fatal(err)
	}
	o.Faults = append(o.Faults, sim.FaultHealth, sim.FaultHealth)
	o.Checks.Health = true
	o.Checks.FailoverBound = 0
	o.Checks.Settle = preferredSettle * o.ElectionTimeout
	o.Checks.Preferred = true
	return o
}

// TestCoreRingStaleSuspicionReplay replays the core-ring schedule under
// health faults that found ring routing an election message past its own
// candidate: after the heal only n2 is eligible, n1 still suspects it (n2,
// a candidate, never sends to n1), and n1 passed n2's election message on
// to n3, round and round, for ever (a liveness violation 12 s after the
// heal before the fix).
func TestCoreRingStaleSuspicionReplay(t *testing.T) {
	res, err := sim.Run(coreHealthOptions(t, "core-ring"), 12152912330625405863)
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation != nil {
		t.Fatalf("seed 12152912330625405863 violates:\n%v", res.Violation)
	}
}
