package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// fleetResult is a daemon on every host: n real agents of which only a few
// vote (majority), the rest observers that learn the leader by gossip.
type fleetResult struct {
	N      int `json:"n"`
	Voters int `json:"voters"`
	// AgreeAfterStart is from the last agent's start to every agent naming
	// one leader that says it leads.
	AgreeAfterStart time.Duration `json:"agree_after_start_ns"`
	// Window is the idle window CPU was measured over.
	Window time.Duration `json:"window_ns"`
	// LeaderCPU, MedianCPU and MaxCPU are shares of one core (user +
	// system from /proc) over Window.
	LeaderCPU float64 `json:"leader_cpu"`
	MedianCPU float64 `json:"median_cpu"`
	MaxCPU    float64 `json:"max_cpu"`
	// MedianObserverCPU is the median over observers only.
	MedianObserverCPU float64 `json:"median_observer_cpu"`
	MedianRSSMB       float64 `json:"median_rss_mb"`
	MaxRSSMB          float64 `json:"max_rss_mb"`
	// ExactCPU is CPU over Window again, as a share of one core, from
	// every thread's exact run time (cpuNS): the figures above have a
	// 10 ms grain, a tenth of a median agent's share over a 20 s window,
	// too coarse to compare two fleets' medians against 1.2×.
	ExactCPU *agentSpread `json:"cpu_exact,omitempty"`
	// OpenFiles (entries of /proc/PID/fd) and Goroutines (the agent's own
	// go_goroutines) are read at the end of Window. Results from before
	// they were measured load with both nil.
	OpenFiles  *agentSpread `json:"open_files,omitempty"`
	Goroutines *agentSpread `json:"goroutines,omitempty"`
	Running    int          `json:"running"`
	// Failovers: per SIGKILL of the leader, until the surviving voters
	// agree on a new leader, and until every surviving agent does.
	VotersAgree []time.Duration `json:"voters_agree_ns"`
	AllAgree    []time.Duration `json:"all_agree_ns"`
	// EpochReach is AllAgree − VotersAgree: how long the new leader's
	// epoch took to reach the last observer.
	EpochReach []time.Duration `json:"epoch_reach_ns"`
	Failed     int             `json:"failed"`
	Load       [2]float64      `json:"loadavg_1m_before_after"`
	// Flags are agent flags beyond the defaults (-fleet-flags).
	Flags []string `json:"flags,omitempty"`
	// StartGap is the pause between observer starts.
	StartGap time.Duration `json:"start_gap_ns"`
	Error    string        `json:"error,omitempty"`
}

// measureFleet starts n agents with the first voters of them voting,
// measures agreement after start, idle cost over window, and trials
// failovers of the leader.
func measureFleet(ctx context.Context, o *options, n, voters, trials int, window time.Duration) (fleetResult, error) {
	res := fleetResult{N: n, Voters: voters, Window: window, StartGap: o.fleetGap, Flags: o.fleetExtra}
	res.Load[0] = loadAvg()
	dir := filepath.Join(o.work, fmt.Sprintf("fleet-%d-%d", n, voters))
	// The voters start first and elect; then the observers join, one every
	// o.fleetGap. Two shared cores cannot start hundreds of daemons at
	// once and keep a 200 ms election timeout (a fleet's hosts each have
	// their own CPU), and a fleet is rolled out onto a running cluster.
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: n, Protocol: "majority", Profile: defaultProfile, Voters: voters, StartFirst: voters, Extra: o.fleetExtra})
	if err != nil {
		return res, err
	}
	defer c.stop()
	if _, err := c.waitAgreement(formWait, nil, nil); err != nil {
		res.Error = clip("voters: " + err.Error())
		return res, nil
	}
	for i := voters; i < n; i++ {
		if err := c.start(i); err != nil {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(o.fleetGap):
		}
	}
	lastStart := time.Now()
	ag, err := c.waitAgreementTallied(formWait*time.Duration(max(1, n/50)), 10*time.Second, func(f string, args ...any) {
		o.logf("fleet n=%d: "+f, append([]any{n}, args...)...)
	})
	if err != nil {
		res.Error = clip(err.Error())
		return res, nil
	}
	res.AgreeAfterStart = ag.At.Sub(lastStart)
	o.logf("fleet n=%d: all agree on %s %s after the last start", n, ag.Leader, ms(res.AgreeAfterStart))
	if ag, err = c.waitStable(formWait, 5*time.Second); err != nil {
		res.Error = clip(err.Error())
		return res, nil
	}
	// Let start-up work settle (joins, gossip of the membership).
	time.Sleep(10 * time.Second)
	leader := c.index(ag.Leader)
	start := make([]procSample, n)
	startNS := make([]exactCPU, n)
	for i, a := range c.agents {
		start[i] = readProc(a.pid())
		startNS[i] = readExactCPU(a.pid())
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(window):
	}
	var all, obs, rss []float64
	var exact, fds, gor []agentValue
	for i, a := range c.agents {
		end := readProc(a.pid())
		if !end.exists || !start[i].exists {
			continue
		}
		if endNS := readExactCPU(a.pid()); endNS.ok && startNS[i].ok {
			exact = append(exact, agentValue{Agent: a.name, Observer: i >= voters, Value: endNS.shareSince(startNS[i])})
		}
		// Counted before the goroutine scrape below, whose connection
		// would add a descriptor to the agent.
		if n, err := openFiles(a.pid()); err == nil {
			fds = append(fds, agentValue{Agent: a.name, Observer: i >= voters, Value: float64(n)})
		}
		res.Running++
		cpu := float64(end.cpu-start[i].cpu) / float64(end.at.Sub(start[i].at))
		all = append(all, cpu)
		if i >= voters {
			obs = append(obs, cpu)
		}
		rss = append(rss, float64(end.rssKB)/1024)
		if i == leader {
			res.LeaderCPU = cpu
		}
	}
	res.MedianCPU, res.MaxCPU = medianOf(all), slices.Max(all)
	res.MedianObserverCPU = medianOf(obs)
	res.MedianRSSMB, res.MaxRSSMB = medianOf(rss), slices.Max(rss)
	// A second pass: scraping /metrics costs the agent a little CPU,
	// which must not fall into any agent's window above.
	for i, a := range c.agents {
		if !a.running() {
			continue
		}
		if g, err := a.goroutines(ctx); err == nil {
			gor = append(gor, agentValue{Agent: a.name, Observer: i >= voters, Value: g})
		} else {
			o.logf("fleet n=%d: %v", n, err)
		}
	}
	res.ExactCPU, res.OpenFiles, res.Goroutines = spreadOf(exact), spreadOf(fds), spreadOf(gor)
	o.logf("fleet n=%d: leader cpu %.2f%%, median %.2f%%, max %.2f%%, median rss %.1f MB", n, 100*res.LeaderCPU, 100*res.MedianCPU, 100*res.MaxCPU, res.MedianRSSMB)
	o.logf("fleet n=%d: exact cpu %% %s, open files %s, goroutines %s", n, res.ExactCPU.scaled(100), res.OpenFiles, res.Goroutines)

	observers := map[int]bool{}
	for i := voters; i < n; i++ {
		observers[i] = true
	}
	for trial := 0; trial < trials; trial++ {
		before, err := c.waitStable(formWait, stableHold)
		if err != nil {
			return res, fmt.Errorf("fleet n=%d trial %d: %w", n, trial, err)
		}
		victim := c.index(before.Leader)
		newer := func(a agreement) bool { return a.Leader != before.Leader && a.Epoch > before.Epoch }
		skipVoters := map[int]bool{victim: true}
		for i := range observers {
			skipVoters[i] = true
		}
		t0 := c.kill(victim)
		v, errV := c.waitAgreement(electWait, skipVoters, newer)
		all, errA := c.waitAgreement(electWait, map[int]bool{victim: true}, newer)
		if errV != nil || errA != nil {
			res.Failed++
			o.logf("fleet n=%d trial %d: %v %v", n, trial, errV, errA)
		} else {
			res.VotersAgree = append(res.VotersAgree, v.At.Sub(t0))
			res.AllAgree = append(res.AllAgree, all.At.Sub(t0))
			res.EpochReach = append(res.EpochReach, all.At.Sub(v.At))
			o.logf("fleet n=%d trial %d: voters agree %s, all %d agree %s", n, trial, ms(v.At.Sub(t0)), n-1, ms(all.At.Sub(t0)))
		}
		if err := c.start(victim); err != nil {
			return res, err
		}
	}
	res.Load[1] = loadAvg()
	return res, nil
}

// agentValue is one agent's reading of a per-agent figure.
type agentValue struct {
	Agent    string
	Observer bool
	Value    float64
}

// agentSpread is a per-agent figure over a fleet: its median and worst
// over every agent read, and over the observers alone, whose number is
// what grows with the fleet.
type agentSpread struct {
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	// MaxAgent names the agent with the worst value (the first of equals).
	MaxAgent       string  `json:"max_agent"`
	MaxIsVoter     bool    `json:"max_is_voter,omitempty"`
	MedianObserver float64 `json:"median_observer"`
	MaxObserver    float64 `json:"max_observer"`
	// Read is how many agents gave a value (a failed read leaves one out).
	Read int `json:"read"`
}

// spreadOf summarises per-agent readings; nil when there are none.
func spreadOf(vs []agentValue) *agentSpread {
	if len(vs) == 0 {
		return nil
	}
	s := &agentSpread{Read: len(vs), Max: vs[0].Value, MaxAgent: vs[0].Agent, MaxIsVoter: !vs[0].Observer}
	var all, obs []float64
	for _, v := range vs {
		all = append(all, v.Value)
		if v.Observer {
			obs = append(obs, v.Value)
			s.MaxObserver = max(s.MaxObserver, v.Value)
		}
		if v.Value > s.Max {
			s.Max, s.MaxAgent, s.MaxIsVoter = v.Value, v.Agent, !v.Observer
		}
	}
	s.Median, s.MedianObserver = medianOf(all), medianOf(obs)
	return s
}

// String is the spread for the progress log.
func (s *agentSpread) String() string { return s.scaled(1) }

// scaled is String with the values multiplied by k (100: a share as a
// percentage).
func (s *agentSpread) scaled(k float64) string {
	if s == nil {
		return "unread"
	}
	return fmt.Sprintf("median %.3g max %.3g (%s)", k*s.Median, k*s.Max, s.MaxAgent)
}

// exactCPU is a process's exact CPU time at one moment.
type exactCPU struct {
	at time.Time
	ns int64
	ok bool
}

// readExactCPU samples cpuNS; ok is false when the process is gone.
func readExactCPU(pid int) exactCPU {
	ns, err := cpuNS(pid)
	return exactCPU{at: time.Now(), ns: ns, ok: err == nil}
}

// shareSince is the share of one core used between then and e.
func (e exactCPU) shareSince(then exactCPU) float64 {
	return float64(e.ns-then.ns) / float64(e.at.Sub(then.at))
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAvg is the machine's 1-minute load average, to say how busy the
// machine was (other work shares its cores); 0 when unreadable.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return 0
	}
	return l
}

// durList prints each duration in milliseconds, comma-separated.
func durList(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += ", "
		}
		out += ms(d)
	}
	return out
}

// clip shortens an error that lists hundreds of agents for the report.
func clip(s string) string {
	const max = 400
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// flagString shows extra agent flags in the report ("defaults" without).
func flagString(flags []string) string {
	if len(flags) == 0 {
		return "defaults"
	}
	return "`" + strings.Join(flags, " ") + "`"
}
