// Command soak runs many randomised fault schedules of one election
// protocol in the deterministic simulator and prints what it did: schedules
// run, faults injected by kind, elections and violations (each with the
// seed that replays it).
//
//	go run ./sim/cmd/soak -protocol majority -schedules 200000 -seed 1 -workers 2
//	go run ./sim/cmd/soak -protocol majority -replay SEED   # full trace of one schedule
//	go run ./sim/cmd/soak -protocol majority -voters -schedules 200000   # with voter changes
//	go run ./sim/cmd/soak -protocol majority -health -schedules 200000   # with health faults and priorities
//	go run ./sim/cmd/soak -protocol bully -health -schedules 20000   # the same, and the preferred node leads after a quiet
//	go run ./sim/cmd/soak -protocol core-ring -schedules 50000   # the agent's core.Node per node (sim core mode)
//	go run ./sim/cmd/soak -matrix                      # the schedules matrix: every cell, its faults and checks
//	go run ./sim/cmd/soak -cell core-majority/health -schedules 200000 -seed 7   # one cell of it
//	go run ./sim/cmd/soak -cell majority/voters -replay SEED
//	go run ./sim/cmd/soak -cell core-multi/sessions -schedules 20000   # several elections per node, sessions as a nemesis
//
// It exits with status 1 when any schedule violated an invariant.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	protocol := fs.String("protocol", "majority", "protocol to run: "+strings.Join(append(registry.Names(), registry.CoreNames()...), ", "))
	schedules := fs.Int("schedules", 10000, "number of randomised schedules")
	seed := fs.Uint64("seed", 1, "batch seed; schedule i runs with sim.ScheduleSeed(seed, i)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "schedules run in parallel")
	nodes := fs.Int("nodes", 0, "cluster size (0: random 3, 5 or 7)")
	maxViol := fs.Int("max-violations", 10, "stop after this many violations (0: never)")
	faults := fs.String("faults", "", "comma-separated fault kinds to schedule (default all): "+faultNames())
	replay := fs.Uint64("replay", 0, "run only this schedule seed and print its full trace")
	verbose := fs.Bool("v", false, "print every violation's full report")
	voters := fs.Bool("voters", false, "majority: add voter changes to the faults (three times as often as each other kind) with -observers nodes starting as observers")
	observers := fs.Int("observers", 2, "with -voters, or given with a core-mode majority: nodes that start as observers")
	health := fs.Bool("health", false, "add health faults (eligibility flaps, maintenance mid-election, preferred nodes crashing mid-transfer) and the leader-eligible check; bully, ring and ring-hs (bare or core mode) also the preferred-leader check after a quiet, core mode without the failover probe")
	planted := fs.String("unsafe", "", "with -cell majority/...: switch on planted bugs to show the cell catches them: "+strings.Join(registry.PlantedNames(), ", "))
	cellName := fs.String("cell", "", "run one cell of the schedules matrix (variant/set, see -matrix) instead of -protocol and its fault flags")
	matrix := fs.Bool("matrix", false, "print the schedules matrix (every cell, its faults, the checks it switches off and why) and exit")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the batch to this file (go tool pprof)")
	failoverETs := fs.Int("failover-ets", 0, "core mode: failover probe bound in election timeouts (0: the variant's own; 7 is the strict bound, below gossip's earliest death declaration)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *matrix {
		printMatrix(stdout)
		return 0
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "soak: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "soak: cpu profile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if *cellName != "" {
		return runCell(*cellName, *planted, *schedules, *seed, *workers, *maxViol, *replay, *verbose, stdout, stderr)
	}
	o, err := registry.Options(*protocol)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	o.Nodes = *nodes
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "observers" && o.Core != nil {
			o.Observers = *observers
		}
	})
	if *failoverETs > 0 && o.Core != nil {
		o.Checks.FailoverBound = time.Duration(*failoverETs) * o.ElectionTimeout
	}
	if *voters {
		// As sim's TestMajorityVoterChangeSchedules.
		o.Faults = append(sim.VoterFaults(), sim.FaultVoterChange, sim.FaultVoterChange)
		o.Observers = *observers
	}
	if *health {
		// As sim's TestMajorityHealthSchedules; with -voters, both.
		o.Faults = append(o.Faults, sim.FaultHealth, sim.FaultHealth)
		if !*voters {
			o.Faults = sim.HealthFaults()
		}
		o.Checks.Health = true
		if slices.Contains([]string{"bully", "ring", "ring-hs"}, *protocol) {
			// As sim's TestBullyRingHealthSchedules: the preempt delay
			// (3 election timeouts) and ten more, then the check.
			o.Checks.Settle = 13 * o.ElectionTimeout
			o.Checks.Preferred = true
		}
		if slices.Contains([]string{"core-bully", "core-ring", "core-ring-hs"}, *protocol) && !*voters {
			// As sim's TestCoreHealthSchedules: core mode's own faults
			// and health faults, and the preferred-leader check instead
			// of the failover probe, which may crash the one eligible
			// node and leave none that can lead.
			c, _ := registry.Options(*protocol)
			o.Faults = append(c.Faults, sim.FaultHealth, sim.FaultHealth)
			o.Checks.FailoverBound = 0
			o.Checks.Settle = 13 * o.ElectionTimeout
			o.Checks.Preferred = true
		}
	}
	if *faults != "" {
		if o.Faults, err = parseFaults(*faults); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *replay != 0 {
		return replayOne(o, *replay, stdout, stderr)
	}

	start := time.Now()
	st, bad, err := sim.RunMany(o, sim.Batch{Base: *seed, Schedules: *schedules, Workers: *workers, MaxViolations: *maxViol})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "protocol:        %s (batch seed %d, %d workers)\n", *protocol, *seed, *workers)
	fmt.Fprint(stdout, st)
	fmt.Fprintf(stdout, "wall time:       %v (%.0f schedules/s)\n", elapsed.Round(time.Millisecond), float64(st.Schedules)/elapsed.Seconds())
	for _, r := range bad {
		v := r.Violation
		extra := ""
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "voters", "health", "observers", "faults", "nodes", "failover-ets":
				extra += fmt.Sprintf(" -%s=%s", f.Name, f.Value)
			}
		})
		fmt.Fprintf(stdout, "VIOLATION seed %d: %s at %.6fs: %s\n  replay: go run ./sim/cmd/soak -protocol %s%s -replay %d\n",
			r.Seed, v.Invariant, v.At.Seconds(), v.Detail, *protocol, extra, r.Seed)
		if *verbose {
			fmt.Fprintln(stdout, v)
		}
	}
	if len(bad) > 0 {
		return 1
	}
	return 0
}

// allFaults is every kind -faults accepts.
func allFaults() []sim.FaultKind {
	return append(sim.VoterFaults(), sim.FaultHealth, sim.FaultRestartNewPeer, sim.FaultLeave, sim.FaultPauseGroup, sim.FaultPoison, sim.FaultSession)
}

func faultNames() string {
	var names []string
	for _, k := range allFaults() {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

func parseFaults(s string) ([]sim.FaultKind, error) {
	var out []sim.FaultKind
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(allFaults(), func(k sim.FaultKind) bool { return k.String() == name })
		if i < 0 {
			return nil, fmt.Errorf("soak: unknown fault %q (have %s)", name, faultNames())
		}
		out = append(out, allFaults()[i])
	}
	return out, nil
}

// printMatrix writes the schedules matrix as a table: each cell, whether
// it runs, its fault kinds, and the checks it switches off with why.
func printMatrix(w io.Writer) {
	for _, c := range registry.Matrix() {
		if !c.Runs() {
			fmt.Fprintf(w, "%-26s not applicable: %s\n", c.Name(), c.NotApplicable)
			continue
		}
		o, err := c.Options()
		if err != nil {
			fmt.Fprintf(w, "%-26s error: %v\n", c.Name(), err)
			continue
		}
		var kinds []string
		for _, k := range o.Faults {
			if !slices.Contains(kinds, k.String()) {
				kinds = append(kinds, k.String())
			}
		}
		fmt.Fprintf(w, "%-26s faults: %s\n", c.Name(), strings.Join(kinds, ","))
		fmt.Fprintf(w, "%-26s checks: %s\n", "", checkNames(o.Checks))
		for _, e := range o.Elections {
			fmt.Fprintf(w, "%-26s election %s: %s\n", "", e.Name, checkNames(e.Checks))
		}
		if c.Schedules > 0 {
			fmt.Fprintf(w, "%-26s CI:     %d schedules\n", "", c.Schedules)
		}
		for _, off := range c.Off {
			fmt.Fprintf(w, "%-26s off:    %s\n", "", off)
		}
	}
}

// checkNames lists the invariants checks enforces.
func checkNames(c sim.Checks) string {
	var on []string
	add := func(b bool, name string) {
		if b {
			on = append(on, name)
		}
	}
	add(c.SingleLeaderPerEpoch, sim.InvSingleLeader)
	add(c.AgreeOnLeaderOfEpoch, sim.InvAgree)
	add(c.EpochMonotonic, sim.InvEpochMonotonic)
	add(c.Fencing, sim.InvFencing)
	add(c.Lease, sim.InvLease)
	add(c.VoteOncePerTerm, sim.InvVoteOnce)
	add(c.Configurations, "configurations")
	add(c.Health, sim.InvHealth)
	add(c.LivenessBound > 0, fmt.Sprintf("%s(%v)", sim.InvLiveness, c.LivenessBound))
	add(c.Isolation, sim.InvIsolation)
	add(c.SessionLeader, sim.InvSession)
	add(c.Preferred, fmt.Sprintf("%s(after %v)", sim.InvPreferred, c.Settle))
	add(c.FailoverBound > 0, fmt.Sprintf("%s(%v)", sim.InvFailover, c.FailoverBound))
	return strings.Join(on, ",")
}

// runCell runs (or replays one schedule of) a matrix cell.
func runCell(name, planted string, schedules int, seed uint64, workers, maxViol int, replay uint64, verbose bool, stdout, stderr io.Writer) int {
	c, err := registry.LookupCell(name)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	o, err := c.Options()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	unsafeFlag := ""
	if planted != "" {
		if err := c.Plant(&o, planted); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		unsafeFlag = " -unsafe " + planted
	}
	if replay != 0 {
		return replayOne(o, replay, stdout, stderr)
	}
	start := time.Now()
	st, bad, err := sim.RunMany(o, sim.Batch{Base: seed, Schedules: schedules, Workers: workers, MaxViolations: maxViol})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "cell:            %s%s (batch seed %d, %d workers)\n", name, unsafeFlag, seed, workers)
	fmt.Fprint(stdout, st)
	fmt.Fprintf(stdout, "wall time:       %v (%.0f schedules/s)\n", elapsed.Round(time.Millisecond), float64(st.Schedules)/elapsed.Seconds())
	for _, r := range bad {
		v := r.Violation
		fmt.Fprintf(stdout, "VIOLATION seed %d: %s at %.6fs: %s\n  replay: go run ./sim/cmd/soak -cell %s%s -replay %d\n",
			r.Seed, v.Invariant, v.At.Seconds(), v.Detail, name, unsafeFlag, r.Seed)
		if verbose {
			fmt.Fprintln(stdout, v)
		}
	}
	if len(bad) > 0 {
		return 1
	}
	return 0
}

// replayOne runs schedule seed with its full trace and reports it: exit
// status 1 when it violated an invariant, 2 when it could not run.
func replayOne(o sim.Options, seed uint64, stdout, stderr io.Writer) int {
	o.Trace = stdout
	res, err := sim.Run(o, seed)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintf(stdout, "\nseed %d: %d nodes, ended at %v, trace hash %016x\n%s", res.Seed, res.Schedule.Nodes, res.End, res.TraceHash, res.Stats)
	if res.Violation != nil {
		fmt.Fprintln(stdout, res.Violation)
		return 1
	}
	return 0
}
