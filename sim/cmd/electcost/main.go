// Command electcost measures what one leader failover costs in the
// deterministic simulator as the cluster grows: for every protocol and
// cluster size it lets a fault-free cluster elect a stable leader, crashes
// that leader, and measures, until every survivor follows one new leader,
// the election messages sent (every kind but heartbeats and their
// responses), the virtual time taken, and the wall-clock time the simulator
// spent on it (sim.RunFailover does the simulating).
//
//	go run ./sim/cmd/electcost                       # Markdown table, about 35 s
//	go run ./sim/cmd/electcost -json -sizes 3,5,9 -protocols majority,bully
//
// Timings are those the agent defaults will use (heartbeat 50 ms, election
// timeout 200 ms); messages take 1–2 ms one way. Failure detection is the
// simulator's fixed-delay model, not phi: a survivor gets Suspect(leader)
// one election timeout (plus up to one 10 ms tick) after the crash, and
// MemberDown after five. Trial i of every row runs with seed
// sim.ScheduleSeed(seed, i), so a row replays exactly.
//
// Each phase of a trial (the first stable leader; the failover) may take
// -limit of virtual time and -max-events simulator events; a row stops at
// its first trial that runs out of events, since the protocol is storming
// and the next seeds would cost as much. -full-check swaps the incremental
// checker for the simulator's O(N)-per-event one, for comparison.
//
// -stall freezes the survivors' processes together after the crash (a host
// overload, a VM pause), -stall-every again until they agree, -stall-nodes
// only some of them (sim.Failover's stalls); majority's rows count the
// terms each election took, more than one being a split vote:
//
//	go run ./sim/cmd/electcost -protocols majority -sizes 3,4,5 -trials 200 -fleet= -stall 500ms
//
// Fleet rows (-fleet, up to 10,000 members by default) are majority with a
// fixed voter set (-fleet-voters) and every other member an observer, as
// the agent runs a daemon on every host: the voters' failover is simulated
// at N = voters, and a gossip model (fleet.go) spreads the new leader's
// announcement to every member, as protocols/observe does over memberlist.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags select.
type config struct {
	sizes              []int
	protocols          []string
	trials             int
	seed               uint64
	heartbeat, timeout time.Duration
	minDelay, maxDelay time.Duration
	limit              time.Duration
	maxEvents          int64
	fullCheck          bool
	fleet              []int
	fleetVoters        int
	// stall, stallAfter, stallEvery and stallNodes are sim.Failover's
	// whole-process stalls of the survivors (off when stall is zero).
	stall, stallAfter, stallEvery time.Duration
	stallNodes                    int
}

// Row is the measurement of one protocol at one cluster size, averaged over
// its trials. Message, time and event figures cover the trials that elected
// a new leader.
type Row struct {
	Protocol string `json:"protocol"`
	N        int    `json:"n"`
	Trials   int    `json:"trials"`
	// Elected counts the trials in which every survivor came to follow a
	// new leader within the limits.
	Elected int `json:"elected"`
	// MsgsPerElection is the mean number of election messages (every kind
	// but heartbeats and heartbeat responses) sent from the crash to
	// agreement; MsgsMin and MsgsMax bound it over the trials.
	MsgsPerElection float64 `json:"msgs_per_election"`
	MsgsMin         int64   `json:"msgs_min"`
	MsgsMax         int64   `json:"msgs_max"`
	// MsgsByKind is the mean per election of every election message kind.
	MsgsByKind map[string]float64 `json:"msgs_by_kind"`
	// Theory is the protocol's textbook count for this failover.
	Theory string `json:"theory"`
	// VirtualMsMedian and VirtualMsMax are the simulated time from the
	// crash to agreement.
	VirtualMsMedian float64 `json:"virtual_ms_median"`
	VirtualMsMax    float64 `json:"virtual_ms_max"`
	// TermsMedian and TermsMax (majority only) are the terms an election
	// took: the new leader's term minus the crashed one's; more than one
	// is a split vote (or a campaign that lost) on the way.
	TermsMedian float64 `json:"terms_median,omitempty"`
	TermsMax    uint64  `json:"terms_max,omitempty"`
	// Suspected counts the elected trials in which some survivor's detector
	// suspected the leader before agreement (elsewhere an election timeout
	// fired first); SuspectMsMedian is the simulated time from the crash to
	// the first such suspicion, -1 when there was none.
	Suspected       int     `json:"suspected"`
	SuspectMsMedian float64 `json:"suspect_ms_median"`
	// WallMsPerElection is the mean wall-clock time the simulator took from
	// the crash to agreement.
	WallMsPerElection float64 `json:"wall_ms_per_election"`
	// EventsPerElection is the mean number of simulator events (deliveries
	// and ticks) from the crash to agreement.
	EventsPerElection float64 `json:"events_per_election"`
	// TraceHash combines the trials' trace fingerprints: same flags, same
	// hash.
	TraceHash string `json:"trace_hash"`
	// Failures describes the trials that elected nobody, with their seeds.
	Failures []string `json:"failures,omitempty"`

	// Fleet rows (-fleet): Voters of the N members vote, the rest observe
	// and learn the new leader by gossip (protocols/observe). Election
	// figures are the voters' (simulated at N = Voters); the virtual times
	// add the gossip model's spread to the last member, GossipMs*.
	Voters                 int     `json:"voters,omitempty"`
	GossipMsMedian         float64 `json:"gossip_ms_median,omitempty"`
	GossipMsMax            float64 `json:"gossip_ms_max,omitempty"`
	GossipPacketsPerMember float64 `json:"gossip_packets_per_member,omitempty"`
	// GossipMissed counts members, over all trials, the announcement
	// never reached (memberlist's push-pull would repair them later).
	GossipMissed int `json:"gossip_missed,omitempty"`

	// virtual is every elected trial's failover time, in trial order.
	virtual []time.Duration
}

// defaultConfig is the configuration of a run without flags.
func defaultConfig() config {
	return config{
		sizes:       []int{3, 5, 9, 25, 50, 100, 250, 500, 1000},
		protocols:   registry.Names(),
		trials:      5,
		seed:        1,
		heartbeat:   50 * time.Millisecond,
		timeout:     200 * time.Millisecond,
		minDelay:    time.Millisecond,
		maxDelay:    2 * time.Millisecond,
		limit:       10 * time.Second,
		maxEvents:   5_000_000,
		fleet:       []int{100, 250, 1000, 10000},
		fleetVoters: 5,
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	d := defaultConfig()
	fs := flag.NewFlagSet("electcost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sizes", join(d.sizes), "comma-separated cluster sizes")
	protos := fs.String("protocols", strings.Join(d.protocols, ","), "comma-separated protocols: "+strings.Join(registry.Names(), ", "))
	trials := fs.Int("trials", d.trials, "failovers per protocol and size, each with its own seed")
	seed := fs.Uint64("seed", d.seed, "base seed; trial i runs with sim.ScheduleSeed(seed, i)")
	asJSON := fs.Bool("json", false, "print one JSON object per protocol and size instead of a Markdown table")
	hb := fs.Duration("heartbeat", d.heartbeat, "heartbeat interval")
	et := fs.Duration("election-timeout", d.timeout, "election timeout (also the simulated detector's suspicion delay)")
	minDelay := fs.Duration("min-delay", d.minDelay, "shortest one-way message delay")
	maxDelay := fs.Duration("max-delay", d.maxDelay, "longest one-way message delay")
	limit := fs.Duration("limit", d.limit, "virtual time allowed for each phase (first stable leader; failover)")
	maxEvents := fs.Int64("max-events", d.maxEvents, "simulator events allowed for each phase; a row stops at its first trial that hits it (0: no limit)")
	full := fs.Bool("full-check", false, "run the simulator's O(N)-per-event checker and detector instead of the incremental ones")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	fleet := fs.String("fleet", join(d.fleet), "member counts of fleet rows: majority with -fleet-voters voters, the rest observers learning the leader by gossip (empty: none; needs majority in -protocols)")
	fleetVoters := fs.Int("fleet-voters", d.fleetVoters, "voters of the fleet rows")
	stall := fs.Duration("stall", 0, "freeze survivors' processes together for this long (a host overload or VM pause; 0: never)")
	stallAfter := fs.Duration("stall-after", 0, "when the first stall starts, after the crash")
	stallEvery := fs.Duration("stall-every", 0, "period of further stalls until the survivors agree (0: one stall)")
	stallNodes := fs.Int("stall-nodes", 0, "survivors that stall, drawn per stall (0: all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "electcost: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := config{
		trials: *trials, seed: *seed,
		heartbeat: *hb, timeout: *et, minDelay: *minDelay, maxDelay: *maxDelay,
		limit: *limit, maxEvents: *maxEvents, fullCheck: *full,
		stall: *stall, stallAfter: *stallAfter, stallEvery: *stallEvery, stallNodes: *stallNodes,
	}
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.protocols, err = parseProtocols(*protos); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	cfg.fleetVoters = *fleetVoters
	if cfg.fleetVoters < 3 {
		fmt.Fprintln(stderr, "electcost: -fleet-voters must be at least 3")
		return 2
	}
	if cfg.fleet, err = parseFleet(*fleet, cfg.fleetVoters); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.trials < 1 {
		fmt.Fprintln(stderr, "electcost: -trials must be at least 1")
		return 2
	}
	if cfg.stall < 0 || cfg.stallAfter < 0 || cfg.stallEvery < 0 || cfg.stallNodes < 0 {
		fmt.Fprintln(stderr, "electcost: -stall, -stall-after, -stall-every and -stall-nodes must not be negative")
		return 2
	}

	if *cpuProfile != "" {
		stop, err := profile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer stop()
	}

	start := time.Now()
	var rows []Row
	for _, p := range cfg.protocols {
		for _, n := range cfg.sizes {
			if p == "majority" && n > protocols.MaxVoters {
				// Every member of a row is a voter, and majority refuses
				// more than MaxVoters: larger majority clusters are the
				// fleet rows (a fixed voter set, the rest observers).
				fmt.Fprintf(stderr, "electcost: majority N=%d skipped: more than %d voters is refused (protocols.MaxVoters); the fleet rows show larger clusters\n", n, protocols.MaxVoters)
				continue
			}
			t0 := time.Now()
			row, err := measure(cfg, p, n)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			fmt.Fprintf(stderr, "electcost: %s N=%d: %d/%d elected, %.0f msgs, %v\n",
				p, n, row.Elected, row.Trials, row.MsgsPerElection, time.Since(t0).Round(time.Millisecond))
			rows = append(rows, row)
		}
	}
	if len(cfg.fleet) > 0 && slices.Contains(cfg.protocols, "majority") {
		var voterRow *Row
		for i := range rows {
			if rows[i].Protocol == "majority" && rows[i].N == cfg.fleetVoters {
				voterRow = &rows[i]
			}
		}
		if voterRow == nil {
			r, err := measure(cfg, "majority", cfg.fleetVoters)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			voterRow = &r
		}
		for _, n := range cfg.fleet {
			t0 := time.Now()
			row := measureFleet(cfg, *voterRow, voterRow.virtual, n, cfg.fleetVoters)
			fmt.Fprintf(stderr, "electcost: majority N=%d (%d voters): gossip to all %.0f ms median, %.1f packets per member, %v\n",
				n, cfg.fleetVoters, row.GossipMsMedian, row.GossipPacketsPerMember, time.Since(t0).Round(time.Millisecond))
			rows = append(rows, row)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				fmt.Fprintf(stderr, "electcost: writing JSON: %v\n", err)
				return 1
			}
		}
	} else {
		writeTable(stdout, cfg, rows, time.Since(start))
	}
	return 0
}

// profile starts a CPU profile into path and returns what stops it.
func profile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("electcost: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("electcost: cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// options returns the simulator options of a protocol at cfg's timings.
func options(cfg config, protocol string) (sim.Options, error) {
	e, err := registry.Lookup(protocol)
	if err != nil {
		return sim.Options{}, fmt.Errorf("electcost: %w", err)
	}
	return sim.Options{
		Factory:           e.Factory,
		Checks:            e.Checks(cfg.timeout),
		ElectionTimeout:   cfg.timeout,
		HeartbeatInterval: cfg.heartbeat,
	}, nil
}

// trial is one failover: the simulator's result and the wall-clock time
// from the crash to agreement.
type trial struct {
	res  sim.FailoverResult
	wall time.Duration
}

// failover runs one trial of protocol at size n with the given seed. An
// invariant violation is an error; so is a failed setup, except that a
// cluster without a stable first leader is reported by a wrapped
// sim.ErrNoStableLeader or sim.ErrEventLimit.
func failover(cfg config, protocol string, n int, seed uint64) (trial, error) {
	o, err := options(cfg, protocol)
	if err != nil {
		return trial{}, err
	}
	var t trial
	var t0 time.Time
	t.res, err = sim.RunFailover(o, seed, sim.Failover{
		Nodes: n, MinDelay: cfg.minDelay, MaxDelay: cfg.maxDelay,
		Limit: cfg.limit, MaxEvents: cfg.maxEvents, FullCheck: cfg.fullCheck,
		OnCrash:  func() { t0 = time.Now() },
		OnAgreed: func() { t.wall = time.Since(t0) },
		Stall:    cfg.stall, StallAfter: cfg.stallAfter, StallEvery: cfg.stallEvery, StallNodes: cfg.stallNodes,
	})
	switch {
	case err != nil:
		return t, fmt.Errorf("electcost: %s N=%d seed %d: %w", protocol, n, seed, err)
	case t.res.Violation != nil:
		return t, fmt.Errorf("electcost: %s N=%d: %w", protocol, n, t.res.Violation)
	}
	return t, nil
}

// measure runs the trials of one protocol at one size. A trial that hits
// the event limit (a message storm) ends the row: the next seeds would
// mostly storm too, at great cost.
func measure(cfg config, protocol string, n int) (Row, error) {
	row := Row{Protocol: protocol, N: n, Trials: cfg.trials, MsgsByKind: map[string]float64{}, Theory: theory(protocol, n)}
	var (
		msgs                []int64
		virt, suspect, wall []time.Duration
		terms               []uint64
		events              int64
		hash                uint64 = 14695981039346656037
	)
	for i := range row.Trials {
		seed := sim.ScheduleSeed(cfg.seed, i)
		t, err := failover(cfg, protocol, n, seed)
		hash = (hash ^ t.res.TraceHash) * 1099511628211
		res := t.res
		switch {
		case errors.Is(err, sim.ErrNoStableLeader), errors.Is(err, sim.ErrEventLimit):
			row.Failures = append(row.Failures, fmt.Sprintf("seed %d: no first leader to crash: %v", seed, errors.Unwrap(err)))
		case err != nil:
			return row, err
		case !res.Agreed:
			row.Failures = append(row.Failures, fmt.Sprintf("seed %d: no agreement %v after the crash (%d events, %d election messages)",
				seed, res.Elapsed.Round(time.Millisecond), res.Events, electionMsgs(res.Sent)))
		default:
			row.Elected++
			msgs = append(msgs, electionMsgs(res.Sent))
			for k, c := range res.Sent {
				if !heartbeat(k) {
					row.MsgsByKind[k.String()] += float64(c)
				}
			}
			virt = append(virt, res.Elapsed)
			terms = append(terms, res.NewEpoch-res.Epoch)
			if res.Suspected >= 0 {
				suspect = append(suspect, res.Suspected)
			}
			wall = append(wall, t.wall)
			events += res.Events
		}
		if errors.Is(err, sim.ErrEventLimit) || (err == nil && !res.Agreed && cfg.maxEvents > 0 && res.Events >= cfg.maxEvents) {
			row.Trials = i + 1
			row.Failures = append(row.Failures, fmt.Sprintf("row stopped after %d trials at the event limit (-max-events %d)", i+1, cfg.maxEvents))
			break
		}
	}
	row.TraceHash = fmt.Sprintf("%016x", hash)
	row.Suspected = len(suspect)
	row.SuspectMsMedian = -1
	if len(suspect) > 0 {
		row.SuspectMsMedian = ms(median(suspect))
	}
	if row.Elected == 0 {
		return row, nil
	}
	k := float64(row.Elected)
	var sum int64
	for _, m := range msgs {
		sum += m
	}
	row.MsgsPerElection = float64(sum) / k
	row.MsgsMin, row.MsgsMax = slices.Min(msgs), slices.Max(msgs)
	for kind := range row.MsgsByKind {
		row.MsgsByKind[kind] /= k
	}
	row.virtual = virt
	row.VirtualMsMedian = ms(median(virt))
	row.VirtualMsMax = ms(slices.Max(virt))
	if protocol == "majority" {
		slices.Sort(terms)
		row.TermsMedian = float64(terms[(len(terms)-1)/2]+terms[len(terms)/2]) / 2
		row.TermsMax = terms[len(terms)-1]
	}
	var w time.Duration
	for _, d := range wall {
		w += d
	}
	row.WallMsPerElection = ms(w) / k
	row.EventsPerElection = float64(events) / k
	return row, nil
}

// heartbeat reports whether k is a heartbeat or its response, the kinds
// that are not election messages.
func heartbeat(k protocols.MessageKind) bool {
	return k == protocols.MsgHeartbeat || k == protocols.MsgHeartbeatResp
}

// electionMsgs sums every kind but heartbeats.
func electionMsgs(sent map[protocols.MessageKind]int64) int64 {
	var t int64
	for k, c := range sent {
		if !heartbeat(k) {
			t += c
		}
	}
	return t
}

// theory is the protocol's textbook message count for a failover of n
// nodes (n-1 survivors, the crashed leader the highest id for bully and
// ring).
func theory(protocol string, n int) string {
	s := n - 1 // survivors
	switch protocol {
	case "majority":
		// One uncontested PreVote and Vote round, each to the other n-1
		// voters (the dead leader included), answered by the n-2 live ones.
		return fmt.Sprintf("4(N−1)−2 = %d", 4*(n-1)-2)
	case "bully":
		// Best: the second-highest id notices first and announces itself
		// to the n-2 others. Worst: every survivor runs one election,
		// sending ELECTION to every higher id (the dead leader too, not yet
		// suspected), answered with OK by the live ones, then n-1
		// COORDINATOR: n(n-1)/2 + (n-1)(n-2)/2 + n-1 = n(n-1).
		return fmt.Sprintf("N−2 … N(N−1) = %d … %d", n-2, n*(n-1))
	case "ring":
		// LCR on a ring ordered by id, every survivor starting at once:
		// 2s-1 ELECT and s LEADER.
		return fmt.Sprintf("3s−1 = %d", 3*s-1)
	case "ring-hs":
		return fmt.Sprintf("≤ 8s(1+⌈log₂s⌉)+s = %d", 8*s*(1+bits.Len(uint(s-1)))+s)
	}
	return ""
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}

// median returns the median of ds (the mean of the middle two when even).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeTable prints the rows as a Markdown table with the settings above it.
func writeTable(w io.Writer, cfg config, rows []Row, took time.Duration) {
	fmt.Fprintf(w, "Leader failover cost in the simulator: heartbeat %v, election timeout %v, one-way delay %v–%v, tick %v.\n",
		cfg.heartbeat, cfg.timeout, cfg.minDelay, cfg.maxDelay, 10*time.Millisecond)
	fmt.Fprintf(w, "Failure detection: the simulator's fixed delay (Suspect after %v unreachable, noticed at a tick; MemberDown after %v), no phi.\n",
		cfg.timeout, 5*cfg.timeout)
	checker := "incremental checker (the node each event touched)"
	if cfg.fullCheck {
		checker = "full checker (every node after every event)"
	}
	fmt.Fprintf(w, "Trials per row: %d, trial i with seed sim.ScheduleSeed(%d, i); %s; limits per phase %v virtual, %d events.\n",
		cfg.trials, cfg.seed, checker, cfg.limit, cfg.maxEvents)
	if cfg.stall > 0 {
		who := "every survivor freezes"
		if cfg.stallNodes > 0 {
			who = fmt.Sprintf("%d survivor(s) freeze", cfg.stallNodes)
		}
		again := ""
		if cfg.stallEvery > 0 {
			again = fmt.Sprintf(", again every %v until they agree", cfg.stallEvery)
		}
		fmt.Fprintf(w, "Stalls: %s together for %v, %v after the crash%s.\n", who, cfg.stall, cfg.stallAfter, again)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| protocol | N | elected | msgs/election | min–max | theory | by kind | virtual ms median | virtual ms max | terms median (max) | suspected first (ms) | wall ms/election | events/election |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.Voters > 0 {
			continue // the fleet table below
		}
		if r.Elected == 0 {
			fmt.Fprintf(w, "| %s | %d | 0/%d | — | — | %s | — | — | — | — | — | — | — |\n", r.Protocol, r.N, r.Trials, r.Theory)
			continue
		}
		susp := fmt.Sprintf("%d/%d", r.Suspected, r.Elected)
		if r.Suspected > 0 {
			susp += fmt.Sprintf(" (%.0f)", r.SuspectMsMedian)
		}
		terms := "—"
		if r.TermsMax > 0 {
			terms = fmt.Sprintf("%g (%d)", r.TermsMedian, r.TermsMax)
		}
		fmt.Fprintf(w, "| %s | %d | %d/%d | %.1f | %d–%d | %s | %s | %.1f | %.1f | %s | %s | %.2f | %.0f |\n",
			r.Protocol, r.N, r.Elected, r.Trials, r.MsgsPerElection, r.MsgsMin, r.MsgsMax, r.Theory,
			byKind(r.MsgsByKind), r.VirtualMsMedian, r.VirtualMsMax, terms, susp, r.WallMsPerElection, r.EventsPerElection)
	}
	writeFleetTable(w, cfg, rows)
	for _, r := range rows {
		if r.Voters > 0 {
			continue // the voters' row lists them
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "\n%s N=%d: %s", r.Protocol, r.N, f)
		}
	}
	fmt.Fprintf(w, "\nTotal wall time %v.\n", took.Round(time.Millisecond))
}

// byKind renders per-kind means in wire order.
func byKind(m map[string]float64) string {
	var parts []string
	for _, k := range protocols.AllKinds() {
		if v, ok := m[k.String()]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// join renders sizes as a comma-separated list.
func join(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// parseSizes parses a comma-separated list of cluster sizes.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("electcost: -sizes: %w", err)
		}
		if n < 3 || n > int(protocols.MaxEpochID) {
			return nil, fmt.Errorf("electcost: -sizes: %d is not between 3 and %d", n, protocols.MaxEpochID)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseProtocols parses a comma-separated list of registered protocols.
func parseProtocols(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, err := registry.Lookup(f); err != nil {
			return nil, fmt.Errorf("electcost: -protocols: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}
