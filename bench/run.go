package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the benchmark's flags, resolved.
type options struct {
	repo, out, work string
	agentBin        string
	wakefloorBin    string
	parts           map[string]bool
	quick           bool
	keep            bool

	trials          int
	sizes           []int
	protocols       []string
	steady          time.Duration
	steadyProtocols []string
	latencyFor      time.Duration
	rates           []int
	scaleSizes      []int
	scaleWindow     time.Duration
	scaleProtocols  []string
	fleetSizes      []int
	fleetVoters     int
	fleetTrials     int
	fleetWindow     time.Duration
	fleetGap        time.Duration
	fleetExtra      []string
	simArgs         string
	etcdTrials      int
	etcdDefault     int
	floorWindow     time.Duration
	floorWindows    int
	tuneGather      time.Duration
	tuneWindow      time.Duration
	cmdline         string
}

// allParts are the report's sections, in the order they run.
var allParts = []string{"failover", "handover", "cost", "floor", "latency", "steady", "scale", "fleet", "sim", "etcd", "tune"}

// logf prints progress with a timestamp on stderr.
func (o *options) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// runBench parses the benchmark flags, runs the selected parts, merges
// their results into OUT/results.json and rewrites the report from it.
func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o := &options{}
	fs.StringVar(&o.repo, "repo", "", "the conclave repository (default: the parent of the bench module)")
	fs.StringVar(&o.out, "out", "", "where to write results.json, README.md and the plots (default: REPO/docs/benchmarks; a temporary folder with -quick)")
	fs.StringVar(&o.work, "work", "", "scratch folder for agents' data and logs (default: a temporary folder)")
	fs.BoolVar(&o.keep, "keep", false, "keep the scratch folder (agents' logs) and print its path")
	fs.BoolVar(&o.quick, "quick", false, "a small smoke run of every part (a few minutes) into a temporary folder")
	parts := fs.String("parts", strings.Join(allParts, ","), "comma-separated parts to run: "+strings.Join(allParts, ","))
	fs.IntVar(&o.trials, "trials", 20, "failover and handover trials per series")
	sizes := fs.String("sizes", "3,5,9", "cluster sizes for failover")
	protocols := fs.String("protocols", "majority,bully,ring", "protocols to fail over")
	fs.DurationVar(&o.steady, "steady", 10*time.Minute, "how long each false-alarm run watches a steady cluster under jitter")
	steadyProtocols := fs.String("steady-protocols", "majority", "protocols watched for false alarms at default settings (majority also runs the fast profile)")
	fs.DurationVar(&o.latencyFor, "latency-duration", 10*time.Second, "how long each /v1/status rate runs")
	rates := fs.String("rates", "1000,5000", "/v1/status request rates per second")
	scale := fs.String("scale", "25,50", "cluster sizes for the scale part")
	fs.DurationVar(&o.scaleWindow, "scale-window", time.Minute, "how long a scale cluster must keep its leader")
	scaleProtocols := fs.String("scale-protocols", "majority", "protocols of the scale part (every agent a voter)")
	fleet := fs.String("fleet", "100,250", "agent counts for the fleet part (a few voters, the rest observers)")
	fs.IntVar(&o.fleetVoters, "fleet-voters", 3, "voters in the fleet part")
	fs.IntVar(&o.fleetTrials, "fleet-trials", 3, "leader failovers per fleet size")
	fs.DurationVar(&o.fleetWindow, "fleet-window", 20*time.Second, "idle window of the fleet part's CPU measurement")
	fleetExtra := fs.String("fleet-flags", "", "extra agent flags for the fleet part, space-separated (e.g. -gossip.profile=wan)")
	fs.DurationVar(&o.fleetGap, "fleet-gap", 100*time.Millisecond, "pause between observer starts in the fleet part (the voters start first)")
	fs.StringVar(&o.simArgs, "sim-args", "", "extra arguments for sim/cmd/electcost")
	fs.IntVar(&o.etcdTrials, "etcd-trials", 20, "etcd failovers at the tuned (2 s) session TTL")
	fs.IntVar(&o.etcdDefault, "etcd-default-trials", 3, "etcd failovers at concurrency's default session TTL (60 s each)")
	fs.DurationVar(&o.floorWindow, "floor-window", 15*time.Second, "length of each window of the floor part")
	fs.IntVar(&o.floorWindows, "floor-windows", 3, "windows of the floor part (the ratio is their median)")
	fs.DurationVar(&o.tuneGather, "tune-gather", time.Minute, "how long the tune part's first cluster gathers heartbeat gaps for agent tune")
	fs.DurationVar(&o.tuneWindow, "tune-window", time.Minute, "how long the tune part counts false alarms at each setting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.cmdline = "bash scripts/bench " + strings.Join(args, " ")
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("trials", func() { o.trials = 2 })
		def("sizes", func() { *sizes = "3" })
		def("steady", func() { o.steady = 5 * time.Second })
		def("latency-duration", func() { o.latencyFor = time.Second })
		def("rates", func() { *rates = "200" })
		def("scale", func() { *scale = "7" })
		def("scale-window", func() { o.scaleWindow = 5 * time.Second })
		def("fleet", func() { *fleet = "7" })
		def("fleet-trials", func() { o.fleetTrials = 1 })
		def("fleet-window", func() { o.fleetWindow = 3 * time.Second })
		def("sim-args", func() { o.simArgs = "-sizes 3,5 -trials 1" })
		def("etcd-trials", func() { o.etcdTrials = 1 })
		def("etcd-default-trials", func() { o.etcdDefault = 0 })
		def("floor-window", func() { o.floorWindow = 5 * time.Second })
		def("floor-windows", func() { o.floorWindows = 2 })
		def("tune-gather", func() { o.tuneGather = 15 * time.Second })
		def("tune-window", func() { o.tuneWindow = 5 * time.Second })
	}
	var err error
	if o.sizes, err = parseInts(*sizes); err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	if o.rates, err = parseInts(*rates); err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	if o.scaleSizes, err = parseInts(*scale); err != nil {
		return fmt.Errorf("-scale: %w", err)
	}
	if o.fleetSizes, err = parseInts(*fleet); err != nil {
		return fmt.Errorf("-fleet: %w", err)
	}
	o.protocols = splitList(*protocols)
	o.steadyProtocols = splitList(*steadyProtocols)
	o.scaleProtocols = splitList(*scaleProtocols)
	o.fleetExtra = strings.Fields(*fleetExtra)
	o.parts = map[string]bool{}
	for _, p := range splitList(*parts) {
		known := false
		for _, q := range allParts {
			known = known || p == q
		}
		if !known {
			return fmt.Errorf("-parts: unknown part %q (known: %s)", p, strings.Join(allParts, ","))
		}
		o.parts[p] = true
	}
	if err := o.resolvePaths(); err != nil {
		return err
	}
	defer func() {
		if o.keep {
			fmt.Fprintf(os.Stderr, "kept %s\n", o.work)
		} else {
			os.RemoveAll(o.work)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := o.buildAgent(ctx); err != nil {
		return err
	}
	res, err := loadResults(filepath.Join(o.out, "results.json"))
	if err != nil {
		return err
	}
	res.Machine = machineInfo(o.repo)
	if err := runParts(ctx, o, res); err != nil {
		return err
	}
	if err := res.save(filepath.Join(o.out, "results.json")); err != nil {
		return err
	}
	if err := writeReport(o.out, res); err != nil {
		return err
	}
	o.logf("report written to %s", filepath.Join(o.out, "README.md"))
	return nil
}

// runParts runs each selected part and records its results, saving after
// each so that an interrupted run keeps what it measured.
func runParts(ctx context.Context, o *options, res *results) error {
	save := func(part string) error {
		res.Runs[part] = runInfo{At: time.Now().UTC().Truncate(time.Second), Command: o.cmdline, Quick: o.quick, Commit: res.Machine.Commit}
		return res.save(filepath.Join(o.out, "results.json"))
	}
	if o.parts["failover"] {
		var all []failoverResult
		for _, protocol := range o.protocols {
			for _, n := range o.sizes {
				r, err := measureFailover(ctx, o, protocol, defaultProfile, n, o.trials)
				if err != nil {
					return err
				}
				all = append(all, r)
			}
		}
		// The fast profile's target is for 5 agents, majority; the other
		// protocols show what the same timings do for them. The frugal
		// profile shows what its idle savings cost in failover.
		for _, prof := range []profile{fastProfile, frugalProfile} {
			for _, protocol := range o.protocols {
				r, err := measureFailover(ctx, o, protocol, prof, pick(o.sizes, 5), o.trials)
				if err != nil {
					return err
				}
				all = append(all, r)
			}
		}
		res.Failover = mergeByKey(res.Failover, all, func(f failoverResult) string { return fmt.Sprint(f.Protocol, f.Profile, f.N) })
		if err := save("failover"); err != nil {
			return err
		}
	}
	if o.parts["handover"] {
		var all []handoverResult
		for _, prof := range []profile{defaultProfile, fastProfile} {
			r, err := measureHandover(ctx, o, "majority", prof, pick(o.sizes, 5), o.trials)
			if err != nil {
				return err
			}
			all = append(all, r)
		}
		for _, protocol := range o.protocols {
			if protocol == "majority" {
				continue
			}
			r, err := measureHandover(ctx, o, protocol, defaultProfile, pick(o.sizes, 5), o.trials)
			if err != nil {
				return err
			}
			all = append(all, r)
		}
		res.Handover = mergeByKey(res.Handover, all, func(h handoverResult) string { return fmt.Sprint(h.Protocol, h.Profile, h.N) })
		if err := save("handover"); err != nil {
			return err
		}
	}
	if o.parts["cost"] {
		res.Cost = nil
		for _, protocol := range o.protocols {
			r, err := measureSteady(ctx, o, protocol, defaultProfile, 5, nil, max(5*time.Second, min(time.Minute, o.steady)), "idle")
			if err != nil {
				return err
			}
			res.Cost = append(res.Cost, r)
		}
		if !o.quick {
			r, err := measureSteady(ctx, o, "majority", fastProfile, 5, nil, time.Minute, "idle")
			if err != nil {
				return err
			}
			res.Cost = append(res.Cost, r)
			for _, protocol := range o.protocols {
				r, err := measureSteady(ctx, o, protocol, frugalProfile, 5, nil, max(5*time.Second, min(time.Minute, o.steady)), "idle")
				if err != nil {
					return err
				}
				res.Cost = append(res.Cost, r)
			}
		}
		if err := save("cost"); err != nil {
			return err
		}
	}
	if o.parts["floor"] {
		r, err := measureFloor(ctx, o, floorSpec{Windows: o.floorWindows, Window: o.floorWindow, Settle: 10 * time.Second, Etcd: true, Libp2p: true})
		if err != nil {
			return err
		}
		res.Floor = &r
		if err := save("floor"); err != nil {
			return err
		}
	}
	if o.parts["latency"] {
		r, err := measureStatusLatency(ctx, o, o.rates, o.latencyFor)
		if err != nil {
			return err
		}
		res.Latency = r
		if err := save("latency"); err != nil {
			return err
		}
	}
	if o.parts["steady"] {
		r, err := measureFalseAlarms(ctx, o)
		if err != nil {
			return err
		}
		res.Steady = r
		if err := save("steady"); err != nil {
			return err
		}
	}
	if o.parts["scale"] {
		var all []steadyResult
		for _, protocol := range o.scaleProtocols {
			for _, n := range o.scaleSizes {
				r, err := measureSteady(ctx, o, protocol, defaultProfile, n, nil, o.scaleWindow, "scale")
				if err != nil {
					return err
				}
				all = append(all, r)
			}
		}
		res.Scale = mergeByKey(res.Scale, all, func(s steadyResult) string { return fmt.Sprint(s.Protocol, s.N) })
		if err := save("scale"); err != nil {
			return err
		}
	}
	if o.parts["fleet"] {
		var all []fleetResult
		for _, n := range o.fleetSizes {
			r, err := measureFleet(ctx, o, n, o.fleetVoters, o.fleetTrials, o.fleetWindow)
			if err != nil {
				return err
			}
			all = append(all, r)
			res.Fleet = mergeByKey(res.Fleet, all, func(f fleetResult) string { return fmt.Sprint(f.N, f.Voters, f.Flags) })
			if err := save("fleet"); err != nil {
				return err
			}
		}
	}
	if o.parts["sim"] {
		r, err := runSimCost(ctx, o)
		if err != nil {
			return err
		}
		res.Sim = r
		if err := save("sim"); err != nil {
			return err
		}
	}
	if o.parts["etcd"] {
		r, err := runEtcd(ctx, o)
		if err != nil {
			return err
		}
		res.Etcd = r
		if err := save("etcd"); err != nil {
			return err
		}
	}
	if o.parts["tune"] {
		r, err := measureTune(ctx, o)
		if err != nil {
			return err
		}
		res.Tune = &r
		if err := save("tune"); err != nil {
			return err
		}
	}
	return nil
}

// measureFalseAlarms watches steady clusters under jitter for o.steady,
// all at once: majority at default settings and at the fast profile, and
// the other selected protocols at default settings. Jitter scales with
// each profile's heartbeat interval.
func measureFalseAlarms(ctx context.Context, o *options) ([]steadyResult, error) {
	type job struct {
		protocol string
		prof     profile
		jitter   jitterOptions
	}
	defJitter := jitterOptions{Max: 25 * time.Millisecond, SpikeEvery: 0.005, SpikeDelay: 100 * time.Millisecond}
	fastJitter := jitterOptions{Max: 5 * time.Millisecond, SpikeEvery: 0.005, SpikeDelay: 20 * time.Millisecond}
	var jobs []job
	for _, p := range o.steadyProtocols {
		jobs = append(jobs, job{p, defaultProfile, defJitter})
	}
	jobs = append(jobs, job{"majority", fastProfile, fastJitter})
	out := make([]steadyResult, len(jobs))
	errs := make([]error, len(jobs))
	done := make(chan int)
	for i, j := range jobs {
		go func() {
			jit := j.jitter
			out[i], errs[i] = measureSteady(ctx, o, j.protocol, j.prof, 5, &jit, o.steady, "jitter")
			done <- i
		}()
	}
	for range jobs {
		<-done
	}
	return out, errors.Join(errs...)
}

// runSimCost runs the simulator's election-cost command and reads its JSON.
func runSimCost(ctx context.Context, o *options) ([]simRow, error) {
	args := []string{"run", "./sim/cmd/electcost", "-json"}
	args = append(args, strings.Fields(o.simArgs)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.repo
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sim: go %s: %w", strings.Join(args, " "), err)
	}
	rows, err := decodeSimRows(outb)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	o.logf("sim election cost: %d rows", len(rows))
	return rows, nil
}

// resolvePaths fills in the repository, output and scratch folders.
func (o *options) resolvePaths() error {
	if o.repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.repo = filepath.Dir(wd)
		if _, err := os.Stat(filepath.Join(wd, "cmd", "agent")); err == nil {
			o.repo = wd
		}
	}
	if _, err := os.Stat(filepath.Join(o.repo, "cmd", "agent")); err != nil {
		return fmt.Errorf("-repo %s does not look like the conclave repository: %w", o.repo, err)
	}
	if o.work == "" {
		// Short: agent sockets must fit in 103 bytes.
		dir, err := os.MkdirTemp("", "cvb")
		if err != nil {
			return err
		}
		o.work = dir
	}
	if o.out == "" {
		if o.quick {
			dir, err := os.MkdirTemp("", "cvb-report")
			if err != nil {
				return err
			}
			o.out = dir
		} else {
			o.out = filepath.Join(o.repo, "docs", "benchmarks")
		}
	}
	return os.MkdirAll(o.out, 0o755)
}

// buildAgent builds the agent binary without the race detector, as
// operators run it, and the floor part's wakefloor beside it.
func (o *options) buildAgent(ctx context.Context) error {
	o.agentBin = filepath.Join(o.work, "agent")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", o.agentBin, "./cmd/agent")
	cmd.Dir = o.repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build agent: %w", err)
	}
	if o.parts["floor"] {
		o.wakefloorBin = filepath.Join(o.work, "wakefloor")
		if err := buildWakefloor(ctx, o.repo, o.wakefloorBin); err != nil {
			return err
		}
	}
	return nil
}

// buildWakefloor builds bench/cmd/wakefloor without the race detector:
// the floor must cost what a plain build costs, as the agent does.
func buildWakefloor(ctx context.Context, repo, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/wakefloor")
	cmd.Dir = filepath.Join(repo, "bench")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build wakefloor: %w", err)
	}
	return nil
}

// mergeByKey replaces the series of old that fresh measured again (same
// key) and appends the new ones, so that running a part for one protocol
// keeps the others' figures.
func mergeByKey[T any](old, fresh []T, key func(T) string) []T {
	out := slices.Clone(old)
	for _, f := range fresh {
		replaced := false
		for i := range out {
			if key(out[i]) == key(f) {
				out[i], replaced = f, true
				break
			}
		}
		if !replaced {
			out = append(out, f)
		}
	}
	return out
}

// pick returns want if sizes holds it, else the largest size at most want,
// else the first.
func pick(sizes []int, want int) int {
	best := 0
	for _, n := range sizes {
		if n == want {
			return n
		}
		if n < want && n > best {
			best = n
		}
	}
	if best == 0 && len(sizes) > 0 {
		return sizes[0]
	}
	return best
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// machineInfo describes where the run happened.
func machineInfo(repo string) machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
		// Uncommitted changes to the agent make the commit a lie.
		if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--", ".", ":!docs/benchmarks", ":!bench").Output(); err == nil && len(st) > 0 {
			m.Commit += "+uncommitted"
		}
	}
	return m
}

// machine is the hardware and software a run measured on.
type machine struct {
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	OS        string `json:"os"`
	GoVersion string `json:"go"`
	Commit    string `json:"commit"`
}

// runInfo says when and how a part was last measured.
type runInfo struct {
	At      time.Time `json:"at"`
	Command string    `json:"command"`
	Quick   bool      `json:"quick,omitempty"`
	Commit  string    `json:"commit"`
}

// results is everything the report shows; parts not run this time keep
// their previous figures.
type results struct {
	Machine  machine            `json:"machine"`
	Runs     map[string]runInfo `json:"runs"`
	Failover []failoverResult   `json:"failover,omitempty"`
	Handover []handoverResult   `json:"handover,omitempty"`
	Cost     []steadyResult     `json:"cost,omitempty"`
	Floor    *floorResult       `json:"floor,omitempty"`
	Latency  []latencyResult    `json:"latency,omitempty"`
	Steady   []steadyResult     `json:"false_alarms,omitempty"`
	Scale    []steadyResult     `json:"scale,omitempty"`
	Fleet    []fleetResult      `json:"fleet,omitempty"`
	Sim      []simRow           `json:"sim,omitempty"`
	Etcd     []etcdResult       `json:"etcd,omitempty"`
	Tune     *tuneResult        `json:"tune,omitempty"`
}

// simRow is one line of sim/cmd/electcost -json.
type simRow struct {
	Protocol        string  `json:"protocol"`
	N               int     `json:"n"`
	Trials          int     `json:"trials"`
	Elected         int     `json:"elected"`
	MsgsPerElection float64 `json:"msgs_per_election"`
	MsgsMin         float64 `json:"msgs_min"`
	MsgsMax         float64 `json:"msgs_max"`
	Theory          string  `json:"theory"`
	VirtualMedianMS float64 `json:"virtual_ms_median"`
	VirtualMaxMS    float64 `json:"virtual_ms_max"`
	WallMS          float64 `json:"wall_ms_per_election"`
	// Fleet rows: Voters of N vote, the rest observe and learn by gossip.
	Voters                 int     `json:"voters,omitempty"`
	GossipMedianMS         float64 `json:"gossip_ms_median,omitempty"`
	GossipMaxMS            float64 `json:"gossip_ms_max,omitempty"`
	GossipPacketsPerMember float64 `json:"gossip_packets_per_member,omitempty"`
	GossipMissed           int     `json:"gossip_missed,omitempty"`
}

// decodeSimRows accepts a JSON array or one object per line.
func decodeSimRows(b []byte) ([]simRow, error) {
	var rows []simRow
	if err := json.Unmarshal(b, &rows); err == nil {
		return rows, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for dec.More() {
		var r simRow
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("decode electcost output: %w", err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// etcdResult is one series of etcd failovers.
type etcdResult struct {
	Label   string          `json:"label"`
	TTL     time.Duration   `json:"ttl_ns"`
	Samples []time.Duration `json:"samples_ns"`
	// Raft marks etcd's own leader failover (not the election recipe).
	Raft bool `json:"raft,omitempty"`
}

// loadResults reads earlier results, or starts empty.
func loadResults(path string) (*results, error) {
	res := &results{Runs: map[string]runInfo{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if err := json.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	if res.Runs == nil {
		res.Runs = map[string]runInfo{}
	}
	return res, nil
}

// save writes the results as indented JSON.
func (r *results) save(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}
