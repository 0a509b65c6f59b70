package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// timings are the settings `agent tune` judges and recommends, as the
// configuration file names them.
type timings struct {
	HeartbeatInterval time.Duration `json:"heartbeat_interval_ns"`
	ElectionTimeout   time.Duration `json:"election_timeout_ns"`
	Threshold         float64       `json:"threshold"`
	MinStdDev         time.Duration `json:"min_std_dev_ns"`
	AcceptablePause   time.Duration `json:"acceptable_pause_ns"`
}

// String is the settings in the docs' words.
func (t timings) String() string {
	return fmt.Sprintf("threshold %g, acceptable_pause %v, election_timeout %v", t.Threshold, t.AcceptablePause, t.ElectionTimeout)
}

// toml is a complete agent configuration for n1 of a cluster in dir with
// these timings: `agent tune -config` needs one that validates, and the
// agents read the same file (their flags override the node's identity).
func (t timings) toml(dir string) string {
	return fmt.Sprintf(`[node]
name = "n1"
id = 1
data_dir = %q

[gossip]
profile = "local"

[detector]
heartbeat_interval = %q
threshold = %g
min_std_dev = %q
acceptable_pause = %q

[election]
protocol = "majority"
voters = ["n1", "n2", "n3"]
election_timeout = %q
`, filepath.Join(dir, "n1"), t.HeartbeatInterval.String(), t.Threshold, t.MinStdDev.String(), t.AcceptablePause.String(), t.ElectionTimeout.String())
}

// tuneVerdict is the part of `agent tune -json`'s verdicts the bench reads
// (the command prints internal/tune.Verdict, whose fields carry no tags).
type tuneVerdict struct {
	Settings struct {
		HeartbeatInterval time.Duration
		ElectionTimeout   time.Duration
		Threshold         float64
		MinStdDev         time.Duration
		AcceptablePause   time.Duration
	}
	SuspectAfter        time.Duration
	PhiFalsePerDay      float64
	TailFalsePerDay     float64
	ElectionFalsePerDay float64
	Failover            time.Duration
}

// timings is the verdict's settings.
func (v tuneVerdict) timings() timings {
	s := v.Settings
	return timings{HeartbeatInterval: s.HeartbeatInterval, ElectionTimeout: s.ElectionTimeout, Threshold: s.Threshold, MinStdDev: s.MinStdDev, AcceptablePause: s.AcceptablePause}
}

// tuneReport is the part of `agent tune -json` the bench reads.
type tuneReport struct {
	Worst struct {
		Member string
		Stats  struct {
			Samples  uint64  `json:"samples"`
			P50Ms    float64 `json:"p50_ms"`
			P99Ms    float64 `json:"p99_ms"`
			P999Ms   float64 `json:"p999_ms"`
			MaxGapMs float64 `json:"max_gap_ms"`
		}
	}
	Current     tuneVerdict
	Recommended tuneVerdict
	Why         string
}

// tuneRow is one setting's predictions (from `agent tune`, on the gaps
// measured at the tight setting) next to what a fresh cluster at that
// setting did in the same jitter.
type tuneRow struct {
	Name    string  `json:"name"`
	Timings timings `json:"timings"`
	// SuspectAfter is when `agent tune` says the detector suspects.
	SuspectAfter time.Duration `json:"suspect_after_ns"`
	// Predicted false suspicions and needless elections in the window,
	// over every watched pair: the per-member-a-day figures of `agent
	// tune` times Pairs (ElectionPairs) times window / day.
	PredPhi, PredTail, PredElections float64
	// Measured in the window: "member suspected" log lines over all
	// agents, conclave_elections_started_total summed over the agents,
	// and leader changes seen on the watch streams.
	Suspicions int     `json:"suspicions"`
	Elections  float64 `json:"elections"`
	// PreCampaigns are election timer expiries: PreVote requests sent,
	// over the N-1 voters each goes to. PreVote and the leader's lease
	// keep most from becoming elections.
	PreCampaigns  float64 `json:"pre_campaigns"`
	LeaderChanges int     `json:"leader_changes"`
	Window        time.Duration
	Load          [2]float64 `json:"loadavg_1m_before_after"`
	Error         string     `json:"error,omitempty"`
}

// tuneResult is the tune part: the jitter, the gaps `agent tune` read, and
// one row per setting.
type tuneResult struct {
	Jitter jitterOptions `json:"jitter"`
	N      int           `json:"n"`
	// Pairs are the detectors watching a member in a steady majority
	// cluster (the leader watches each follower, each follower the
	// leader); ElectionPairs the followers whose election timer runs.
	Pairs, ElectionPairs int
	Gather               time.Duration `json:"gather_ns"`
	Worst                string        `json:"worst_member"`
	Samples              uint64        `json:"samples"`
	P50Ms, P99Ms, P999Ms float64
	MaxGapMs             float64
	Why                  string    `json:"why"`
	Rows                 []tuneRow `json:"rows"`
}

// tuneJitter is the jitter of the tune part: small uniform jitter and a
// rare long hold, which a normal fitted through p50 and p99 does not see
// coming and which the fast profile's timings do not cover.
var tuneJitter = jitterOptions{Max: 5 * time.Millisecond, SpikeEvery: 0.002, SpikeDelay: 80 * time.Millisecond}

// tightTimings is the fast profile (README, config.example.toml): tight
// enough that tuneJitter's holds raise suspicions.
var tightTimings = timings{HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond, Threshold: 10, MinStdDev: 5 * time.Millisecond, AcceptablePause: 20 * time.Millisecond}

// measureTune checks `agent tune` against the jitter proxy: a cluster at
// the tight setting gathers heartbeat gaps for o.tuneGather, the real CLI
// judges them and recommends timings, and fresh clusters at the tight
// setting, one whose suspicion falls on the measured p99.9 gap, a looser
// target's recommendation and the recommendation each run o.tuneWindow
// under the same jitter, counting false alarms.
func measureTune(ctx context.Context, o *options) (tuneResult, error) {
	res := tuneResult{Jitter: tuneJitter, N: 3, Pairs: 4, ElectionPairs: 2, Gather: o.tuneGather}
	dir := filepath.Join(o.work, "tune")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("tune: %w", err)
	}
	// Gather: the tight setting, long enough for p99.9 to mean something.
	gdir := filepath.Join(dir, "gather")
	tightCfg, err := writeTimings(gdir, "tight.toml", tightTimings)
	if err != nil {
		return res, err
	}
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: gdir, N: 3, Protocol: "majority", Jitter: &tuneJitter, Extra: []string{"-config=" + tightCfg}})
	if err != nil {
		return res, err
	}
	defer c.stop()
	ag, err := c.waitStable(formWait, 2*time.Second)
	if err != nil {
		return res, fmt.Errorf("tune: the gathering cluster did not settle: %w", err)
	}
	o.logf("tune: gathering heartbeat gaps for %v under %s", o.tuneGather, tuneJitter)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(o.tuneGather):
	}
	// Ask whoever leads now: it measures both followers.
	leader := c.agents[c.index(ag.Leader)]
	if now, ok := c.agreed(nil, nil); ok {
		leader = c.agents[c.index(now.Leader)]
	}
	rep, err := runAgentTune(ctx, o.agentBin, leader.socket, tightCfg, 1)
	if err != nil {
		return res, err
	}
	w := rep.Worst.Stats
	res.Worst, res.Samples, res.P50Ms, res.P99Ms, res.P999Ms, res.MaxGapMs, res.Why = rep.Worst.Member, w.Samples, w.P50Ms, w.P99Ms, w.P999Ms, w.MaxGapMs, rep.Why
	rec := rep.Recommended.timings()
	// A looser target gives a setting between the two whose predicted
	// count in a window is a few: zero false alarms at both ends would
	// not test the model, so this row is the one that can.
	looser := math.Round(3 * float64(24*time.Hour) / (float64(res.Pairs) * float64(o.tuneWindow)))
	lrep, err := runAgentTune(ctx, o.agentBin, leader.socket, tightCfg, looser)
	if err != nil {
		return res, err
	}
	// At the p99.9: the setting in force with the acceptable pause that
	// moves its suspicion onto the measured p99.9 gap, a point the tail
	// model passes through, so its prediction there is the measurement's
	// own share (0.1 %) and the count tests the gaps' bookkeeping.
	atP999 := tightTimings
	atP999.AcceptablePause += (time.Duration(w.P999Ms*float64(time.Millisecond)) - rep.Current.SuspectAfter).Round(time.Millisecond)
	var prep tuneReport
	if atP999.AcceptablePause > tightTimings.AcceptablePause {
		p999Cfg, err := writeTimings(gdir, "p999.toml", atP999)
		if err != nil {
			return res, err
		}
		if prep, err = runAgentTune(ctx, o.agentBin, leader.socket, p999Cfg, 1); err != nil {
			return res, err
		}
	}
	c.stop()
	o.logf("tune: %s's gaps, %d samples: p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, longest %.1f ms; recommended %s", res.Worst, w.Samples, w.P50Ms, w.P99Ms, w.P999Ms, w.MaxGapMs, rec)

	type setting struct {
		name, dir string
		v         tuneVerdict
	}
	settings := []setting{{"in force (fast profile)", "tight", rep.Current}}
	if prep.Current.Settings.HeartbeatInterval > 0 {
		settings = append(settings, setting{"suspicion at the p99.9 gap", "p999", prep.Current})
	}
	settings = append(settings,
		setting{fmt.Sprintf("agent tune -target %g", looser), "looser", lrep.Recommended},
		setting{"agent tune (-target 1)", "recommended", rep.Recommended})
	for _, s := range settings {
		row, err := measureTuneRow(ctx, o, filepath.Join(dir, s.dir), s.name, s.v, res)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// measureTuneRow runs a fresh cluster at v's timings under the tune
// jitter for o.tuneWindow and counts its false alarms.
func measureTuneRow(ctx context.Context, o *options, dir, name string, v tuneVerdict, res tuneResult) (tuneRow, error) {
	t := v.timings()
	row := tuneRow{Name: name, Timings: t, SuspectAfter: v.SuspectAfter, Window: o.tuneWindow}
	scale := float64(o.tuneWindow) / float64(24*time.Hour)
	row.PredPhi = v.PhiFalsePerDay * scale * float64(res.Pairs)
	row.PredTail = v.TailFalsePerDay * scale * float64(res.Pairs)
	row.PredElections = v.ElectionFalsePerDay * scale * float64(res.ElectionPairs)
	cfg, err := writeTimings(dir, "timings.toml", t)
	if err != nil {
		return row, err
	}
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: res.N, Protocol: "majority", Jitter: &tuneJitter, Extra: []string{"-config=" + cfg}})
	if err != nil {
		return row, err
	}
	defer c.stop()
	ag, err := c.waitStable(formWait, 2*time.Second)
	if err != nil {
		row.Error = err.Error()
		return row, nil
	}
	// Let the detectors fill their windows before counting.
	time.Sleep(5 * time.Second)
	logsBefore := c.logSizes()
	electionsBefore := c.sumMetric(ctx, "conclave_elections_started_total")
	preVotesBefore := c.sumMetricWith(ctx, "conclave_messages_sent_total", `kind="PreVote"`)
	row.Load[0] = loadAvg()
	start := time.Now()
	select {
	case <-ctx.Done():
		return row, ctx.Err()
	case <-time.After(o.tuneWindow):
	}
	row.Load[1] = loadAvg()
	row.Elections = c.sumMetric(ctx, "conclave_elections_started_total") - electionsBefore
	row.PreCampaigns = (c.sumMetricWith(ctx, "conclave_messages_sent_total", `kind="PreVote"`) - preVotesBefore) / float64(res.N-1)
	row.Suspicions = c.countLogSince(logsBefore, "member suspected")
	row.LeaderChanges = c.changesSince(start, ag)
	o.logf("tune %-24s %s: predicted %.2g (phi) %.2g (tail) suspicions, %.2g elections; measured %d suspicions, %.0f pre-campaigns, %.0f elections, %d leader changes in %v, load %.1f → %.1f",
		name, t, row.PredPhi, row.PredTail, row.PredElections, row.Suspicions, row.PreCampaigns, row.Elections, row.LeaderChanges, o.tuneWindow, row.Load[0], row.Load[1])
	return row, nil
}

// writeTimings writes t as a configuration file in dir.
func writeTimings(dir, name string, t timings) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tune: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(t.toml(dir)), 0o644); err != nil {
		return "", fmt.Errorf("tune: %w", err)
	}
	return path, nil
}

// runAgentTune runs `agent tune -json` against socket with the timings in
// cfg, as an operator would.
func runAgentTune(ctx context.Context, bin, socket, cfg string, target float64) (tuneReport, error) {
	var rep tuneReport
	cmd := exec.CommandContext(ctx, bin, "tune", "-socket="+socket, "-config="+cfg, fmt.Sprintf("-target=%g", target), "-json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return rep, fmt.Errorf("agent tune -config %s: %w: %s", cfg, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("agent tune -json printed what the bench cannot read (did its report change?): %w", err)
	}
	return rep, nil
}

// logSizes is every agent's log size now, to count lines written after.
func (c *cluster) logSizes() []int64 {
	sizes := make([]int64, len(c.agents))
	for i, a := range c.agents {
		if fi, err := os.Stat(filepath.Join(c.dir, a.name+".log")); err == nil {
			sizes[i] = fi.Size()
		}
	}
	return sizes
}

// countLogSince counts the log lines containing what that every agent
// wrote after its log had the sizes given.
func (c *cluster) countLogSince(sizes []int64, what string) int {
	n := 0
	for i, a := range c.agents {
		b, err := os.ReadFile(filepath.Join(c.dir, a.name+".log"))
		if err != nil || int64(len(b)) < sizes[i] {
			continue
		}
		n += countLines(b[sizes[i]:], what)
	}
	return n
}

// countLines counts the lines of b that contain what.
func countLines(b []byte, what string) int {
	n := 0
	for line := range bytes.Lines(b) {
		if bytes.Contains(line, []byte(what)) {
			n++
		}
	}
	return n
}

// changesSince counts watch lines, on any agent, received after start and
// naming another leader or epoch than ag.
func (c *cluster) changesSince(start time.Time, ag agreement) int {
	seen := make(map[string]bool)
	for _, a := range c.agents {
		a.mu.Lock()
		for _, ob := range a.history {
			if ob.at.After(start) && (ob.st.Epoch != ag.Epoch || ob.st.Leader != ag.Leader) {
				seen[fmt.Sprintf("%s@%d/%s", a.name, ob.st.Epoch, ob.st.Leader)] = true
			}
		}
		a.mu.Unlock()
	}
	return len(seen)
}

// writeTune renders the tune part: `agent tune`'s predictions next to the
// false alarms each setting raised, scaled to the same window.
func writeTune(w func(string, ...any), t *tuneResult, run runInfo) {
	w("## `agent tune` against the jitter proxy\n\n")
	w("%d majority agents behind jitter proxies (%s) at the fast profile gathered heartbeat gaps for %v; `agent tune -config` on the leader read %s's: %d gaps, p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, longest %.1f ms. ",
		t.N, t.Jitter, t.Gather, t.Worst, t.Samples, t.P50Ms, t.P99Ms, t.P999Ms, t.MaxGapMs)
	w("Then a fresh cluster at each setting ran under the same jitter and counted, after forming and 5 s of settling, `member suspected` log lines, election timer expiries (PreVote requests sent ÷ %d), elections started and leader changes. ", t.N-1)
	w("Predictions are `agent tune`'s per member a day, times the %d watching pairs (the leader watches each follower, each follower the leader; elections: the %d followers), times the window.\n\n", t.Pairs, t.ElectionPairs)
	if run.Commit != "" {
		q := ""
		if run.Quick {
			q = " (quick smoke run: not representative)"
		}
		w("Measured at commit %s, %s UTC, by `%s`%s.\n\n", run.Commit, run.At.Format("2006-01-02 15:04"), strings.TrimSpace(run.Command), q)
	}
	w("| setting | threshold | acceptable_pause | election_timeout | suspects after | window | suspicions: phi model | tail model | measured | election timer expiries: predicted | pre-campaigns | elections | leader changes | load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range t.Rows {
		if r.Error != "" {
			w("| %s | %g | %v | %v | — | — | — | — | %s | | | | | |\n", r.Name, r.Timings.Threshold, r.Timings.AcceptablePause, r.Timings.ElectionTimeout, r.Error)
			continue
		}
		w("| %s | %g | %v | %v | %v | %v | %.2g | %.2g | %d | %.2g | %.0f | %.0f | %d | %.1f → %.1f |\n", r.Name, r.Timings.Threshold, r.Timings.AcceptablePause, r.Timings.ElectionTimeout,
			r.SuspectAfter.Round(time.Millisecond), r.Window, r.PredPhi, r.PredTail, r.Suspicions, r.PredElections, r.PreCampaigns, r.Elections, r.LeaderChanges, r.Load[0], r.Load[1])
	}
	w("\n")
}

// sumMetricWith adds one metric's series that carry label (as in
// `kind="PreVote"`) over every running agent.
func (c *cluster) sumMetricWith(ctx context.Context, series, label string) float64 {
	var total float64
	for _, a := range c.agents {
		if !a.running() {
			continue
		}
		m, err := a.metrics(ctx)
		if err != nil {
			continue
		}
		for k, v := range m {
			if strings.HasPrefix(k, series+"{") && strings.Contains(k, label) {
				total += v
			}
		}
	}
	return total
}
