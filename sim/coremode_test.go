package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/internal/racetest"
	"github.com/conclave-agent/conclave/protocols/ring"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

// coreSchedules is what CI runs per core-mode variant; the soak command
// runs many more.
const coreSchedules = 2000

// TestCoreSchedules runs every protocol inside core.Node, the agent's pure
// driver, with real phi detectors, the membership model and the failover
// probe (sim core mode).
func TestCoreSchedules(t *testing.T) {
	racetest.SkipSampledSchedules(t)
	for _, name := range registry.CoreNames() {
		t.Run(name, func(t *testing.T) {
			o, err := registry.Options(name)
			if err != nil {
				t.Fatal(err)
			}
			if replay(t, o) {
				return
			}
			n := coreSchedules
			if len(o.Elections) > 0 {
				// Several elections per node cost several times a
				// core schedule; the matrix runs their cells in full.
				n = coreSchedules / 10
			}
			if testing.Short() || racetest.Enabled {
				// A sample under -race or -short; scripts/test also runs
				// the full count without the race detector.
				n = 60
			}
			st, bad, err := sim.RunMany(o, sim.Batch{Base: 1, Schedules: n, MaxViolations: 3})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range bad {
				t.Errorf("%s violated %s; replay with: go run ./sim/cmd/soak -protocol %s -replay %d\n%v", name, r.Violation.Invariant, name, r.Seed, r.Violation)
			}
			t.Logf("\n%s", st)
			if len(bad) == 0 && st.Schedules != n {
				t.Fatalf("ran %d schedules, want %d", st.Schedules, n)
			}
			if n < coreSchedules {
				return // too few to insist on every fault kind
			}
			for _, k := range o.Faults {
				if st.Faults[k] == 0 {
					t.Errorf("no %s fault injected", k)
				}
			}
			if st.Elections < int64(st.Schedules) {
				t.Errorf("only %d elections in %d schedules", st.Elections, st.Schedules)
			}
		})
	}
}

// TestCheckerCatchesPolicyBugs plants each liveness bug found with real
// processes (core.Unsafe) and shows a seed on which the checker catches
// it, while the real policy passes the same seed: the first five were
// found with real processes, the last two by core mode itself
// (docs/simulator.md, "Planted policy bugs"). The last case is a safety
// bug instead: an observer's reported epoch going back across a restart
// (docs/simulator.md, finding 3).
func TestCheckerCatchesPolicyBugs(t *testing.T) {
	cases := []struct {
		name      string
		variant   string // registry core-mode name
		unsafe    core.Unsafe
		strict    bool // failover bound below gossip's death declaration
		seed      uint64
		invariant string
	}{
		// A ring leader learned from a LEADER message had no detector:
		// failover waited for gossip to declare it dead.
		{"leader learned from an announcement is not watched", "core-ring-peterson", core.Unsafe{NoWatchLeader: true}, true, 13212905694385056557, sim.InvFailover},
		// A former leader stayed suspected: ring skipped it for ever.
		// Since ring no longer routes an election message past its own
		// candidate (docs/simulator.md, finding 5) this and the next two
		// cost ring time, not liveness: the checker catches them under
		// the strict failover bound.
		{"detectors kept across leadership changes", "core-ring", core.Unsafe{KeepDetectors: true}, true, 7479125737349646483, sim.InvFailover},
		// The dead-member reconnect hole: a member back from dead got no
		// transport peer, so nothing reached it.
		{"no transport peer for a member back from dead", "core-bully", core.Unsafe{NoPeerOnReturn: true}, false, 583982616703494564, sim.InvLiveness},
		{"only heartbeats clear a suspicion", "core-ring-hs", core.Unsafe{HeartbeatsOnlyClear: true}, true, 7110789024577872355, sim.InvFailover},
		{"a rival leader's heartbeat starts a watch", "core-ring", core.Unsafe{WatchRivals: true}, true, 3918522528150733874, sim.InvFailover},
		// An observer's epoch learned by gossip was not persisted: after a
		// restart it reported its protocol's older one (finding 3).
		{"an observer's reported epoch is not persisted", "core-majority", core.Unsafe{ForgetObserved: true}, false, 17911839290282890590, sim.InvEpochMonotonic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := registry.Lookup(c.variant)
			if err != nil {
				t.Fatal(err)
			}
			ets := e.FailoverETs
			if c.strict {
				ets = registry.StrictFailoverETs
			}
			protocol, alg := core.ProtocolRing, ring.AlgLCR
			majority := false
			switch c.variant {
			case "core-majority":
				protocol, alg, majority = core.ProtocolMajority, "", true
			case "core-bully":
				protocol, alg = core.ProtocolBully, ""
			case "core-ring-hs":
				alg = ring.AlgHS
			case "core-ring-peterson":
				alg = ring.AlgPeterson
			}
			good := registry.CoreOptions(e.Core, e.Checks, majority, ets)
			buggy := registry.CoreOptions(registry.Core(protocol, alg, c.unsafe), e.Checks, majority, ets)
			res, err := sim.Run(buggy, c.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation == nil || res.Violation.Invariant != c.invariant {
				t.Fatalf("seed %d: want a %s violation, got %v", c.seed, c.invariant, res.Violation)
			}
			t.Logf("caught %s with seed %d: %s", res.Violation.Invariant, c.seed, res.Violation.Detail)
			res, err = sim.Run(good, c.seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatalf("the real policy fails seed %d too:\n%v", c.seed, res.Violation)
			}
		})
	}
}

// TestCoreModeReplays checks that a core-mode run is a function of its
// seed: the core iterates maps (detectors), which must not leak into what
// it does.
func TestCoreModeReplays(t *testing.T) {
	for _, name := range registry.CoreNames() {
		o, err := registry.Options(name)
		if err != nil {
			t.Fatal(err)
		}
		seeds := 10
		if len(o.Elections) > 0 {
			seeds = 3 // each costs several core schedules
		}
		for i := range seeds {
			seed := sim.ScheduleSeed(3, i)
			a, err := sim.Run(o, seed)
			if err != nil {
				t.Fatal(err)
			}
			b, err := sim.Run(o, seed)
			if err != nil {
				t.Fatal(err)
			}
			if a.TraceHash != b.TraceHash {
				t.Errorf("%s seed %d: trace hashes %016x and %016x", name, seed, a.TraceHash, b.TraceHash)
			}
		}
	}
}

// TestMembershipModel checks, on hand-written schedules, that the
// membership model tells the cores what memberlist would: a member that
// restarts quicker than death detection with a new peer id is never
// declared dead but changes identity; one down longer is declared dead no
// sooner than the model's earliest death declaration; one that leaves is
// declared left.
func TestMembershipModel(t *testing.T) {
	o, err := registry.Options("core-bully")
	if err != nil {
		t.Fatal(err)
	}
	o.Checks.FailoverBound = 0
	cases := []struct {
		name      string
		kind      sim.FaultKind
		down      time.Duration
		want, not []string
	}{
		{"quick restart with a new peer id", sim.FaultRestartNewPeer, 100 * time.Millisecond,
			[]string{"member changed identity [member n3", "member n3 alive"}, []string{"member n3 dead", "member n3 suspect"}},
		{"crash longer than death detection", sim.FaultCrash, 8 * time.Second,
			[]string{"member n3 dead", "member down [member n3 state dead]"}, []string{"member changed identity"}},
		{"graceful leave", sim.FaultLeave, 2 * time.Second,
			[]string{"member n3 left", "member down [member n3 state left]"}, []string{"member n3 dead"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var trace strings.Builder
			o.Trace = &trace
			const at = 3 * time.Second
			s := sim.Schedule{
				Nodes: 3, FaultPhase: at + c.down + time.Second,
				MinDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond,
				Actions: []sim.Action{{At: at, Kind: c.kind, Target: 2, Duration: c.down}},
			}
			res, err := sim.RunSchedule(o, 5, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil {
				t.Fatal(res.Violation)
			}
			// Only what happened after the fault: the joins came before.
			after := trace.String()
			if i := strings.Index(after, "FAULT "+c.kind.String()); i >= 0 {
				after = after[i:]
			} else {
				t.Fatalf("no %s fault in the trace", c.kind)
			}
			for _, w := range c.want {
				if !strings.Contains(after, w) {
					t.Errorf("trace after the fault lacks %q", w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(after, w) {
					t.Errorf("trace after the fault has %q", w)
				}
			}
			if c.kind == sim.FaultCrash {
				first := deadAt(t, after)
				if first < at+1500*time.Millisecond {
					t.Errorf("n3 declared dead at %v, %v after the crash: earlier than the model's 1.5 s", first, first-at)
				}
			}
		})
	}
}

// deadAt returns the virtual time of the first "member n3 dead" line.
func deadAt(t *testing.T, trace string) time.Duration {
	t.Helper()
	for _, l := range strings.Split(trace, "\n") {
		if strings.Contains(l, "member n3 dead") {
			f := strings.Fields(l)
			d, err := time.ParseDuration(f[0])
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatal("no member n3 dead line")
	return 0
}
