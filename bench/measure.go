package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Bounded waits: generous, because they only stop a broken run from
// hanging; the report records what actually happened.
const (
	formWait   = 60 * time.Second
	electWait  = 30 * time.Second
	stableHold = 2 * time.Second
)

// failoverResult is one protocol × cluster size series of SIGKILL trials.
type failoverResult struct {
	Protocol string          `json:"protocol"`
	Profile  string          `json:"profile"`
	N        int             `json:"n"`
	Samples  []time.Duration `json:"samples_ns"`
	// ElectionMsgs is, per trial, the election messages (every kind but
	// heartbeats) the survivors sent from the kill until all agreed, from
	// their own conclave_messages_sent_total counters.
	ElectionMsgs []float64 `json:"election_msgs"`
	Failed       int       `json:"failed"` // trials without agreement in electWait
}

// measureFailover SIGKILLs the leader of an n-agent cluster trials times
// and times how long until every survivor reports the same new leader in
// a higher epoch (the new leader itself saying it leads). The killed agent
// restarts from its data directory before the next trial.
func measureFailover(ctx context.Context, o *options, protocol string, prof profile, n, trials int) (failoverResult, error) {
	res := failoverResult{Protocol: protocol, Profile: prof.Name, N: n}
	dir := filepath.Join(o.work, fmt.Sprintf("failover-%s-%s-%d", protocol, prof.Name, n))
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: n, Protocol: protocol, Profile: prof})
	if err != nil {
		return res, err
	}
	defer c.stop()
	for trial := 0; trial < trials; trial++ {
		before, err := c.waitStable(formWait, stableHold)
		if err != nil {
			return res, fmt.Errorf("failover %s n=%d trial %d: %w", protocol, n, trial, err)
		}
		victim := c.index(before.Leader)
		skip := map[int]bool{victim: true}
		countsBefore := c.sentCounts(ctx, skip)
		t0 := c.kill(victim)
		ag, err := c.waitAgreement(electWait, skip, func(a agreement) bool {
			return a.Leader != before.Leader && a.Epoch > before.Epoch
		})
		if err != nil {
			res.Failed++
			o.logf("failover %s n=%d trial %d: %v", protocol, n, trial, err)
		} else {
			res.Samples = append(res.Samples, ag.At.Sub(t0))
			// Late vote replies still belong to the election.
			time.Sleep(300 * time.Millisecond)
			res.ElectionMsgs = append(res.ElectionMsgs, electionMessages(countsBefore, c.sentCounts(ctx, skip)))
		}
		if err := c.start(victim); err != nil {
			return res, err
		}
	}
	s := summarize(res.Samples)
	o.logf("failover %-8s %-7s n=%d: median %s p90 %s worst %s (%d/%d)", protocol, prof.Name, n, ms(s.Median), ms(s.P90), ms(s.Max), len(res.Samples), trials)
	return res, nil
}

// handoverResult is a series of planned handovers (agent resign).
type handoverResult struct {
	Protocol string          `json:"protocol"`
	Profile  string          `json:"profile"`
	N        int             `json:"n"`
	Samples  []time.Duration `json:"samples_ns"`
	// WatchLatency is, per trial, from just before POST /v1/resign to the
	// resigning agent's own watch line saying it no longer leads: an upper
	// bound on the agent's change-to-NDJSON-line latency.
	WatchLatency []time.Duration `json:"watch_latency_ns"`
	// Spread is, per trial, the time between the first and the last agent's
	// watch line naming the new leader.
	Spread []time.Duration `json:"spread_ns"`
	Failed int             `json:"failed"`
}

// measureHandover asks the leader to resign trials times and times how
// long until every agent, the old leader included, names the same new
// leader in a higher epoch.
func measureHandover(ctx context.Context, o *options, protocol string, prof profile, n, trials int) (handoverResult, error) {
	res := handoverResult{Protocol: protocol, Profile: prof.Name, N: n}
	dir := filepath.Join(o.work, fmt.Sprintf("handover-%s-%s-%d", protocol, prof.Name, n))
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: n, Protocol: protocol, Profile: prof})
	if err != nil {
		return res, err
	}
	defer c.stop()
	for trial := 0; trial < trials; trial++ {
		before, err := c.waitStable(formWait, stableHold)
		if err != nil {
			return res, fmt.Errorf("handover %s trial %d: %w", protocol, trial, err)
		}
		old := c.agents[c.index(before.Leader)]
		t0 := time.Now()
		if err := old.resign(ctx); err != nil {
			return res, err
		}
		ag, err := c.waitAgreement(electWait, nil, func(a agreement) bool {
			return a.Leader != before.Leader && a.Epoch > before.Epoch
		})
		if err != nil {
			res.Failed++
			o.logf("handover %s trial %d: %v", protocol, trial, err)
			continue
		}
		res.Samples = append(res.Samples, ag.At.Sub(t0))
		first := ag.At
		for _, a := range c.agents {
			if ob, ok := a.latest(); ok && ob.at.Before(first) {
				first = ob.at
			}
		}
		res.Spread = append(res.Spread, ag.At.Sub(first))
		if wl, ok := old.firstNotLeaderSince(t0); ok {
			res.WatchLatency = append(res.WatchLatency, wl.Sub(t0))
		}
	}
	s := summarize(res.Samples)
	o.logf("handover %-8s %-7s n=%d: median %s p90 %s worst %s", protocol, prof.Name, n, ms(s.Median), ms(s.P90), ms(s.Max))
	return res, nil
}

// sentCounts scrapes conclave_messages_sent_total by kind from every
// running agent not in skip, summed.
func (c *cluster) sentCounts(ctx context.Context, skip map[int]bool) map[string]float64 {
	total := make(map[string]float64)
	for i, a := range c.agents {
		if skip[i] || !a.running() {
			continue
		}
		m, err := a.metrics(ctx)
		if err != nil {
			continue
		}
		for k, v := range m {
			// conclave_messages_sent_total{election="E",kind="K"}: the
			// kinds of every election, summed.
			labels, ok := strings.CutPrefix(k, `conclave_messages_sent_total{`)
			if !ok {
				continue
			}
			if _, kind, ok := strings.Cut(labels, `kind="`); ok {
				kind, _, _ = strings.Cut(kind, `"`)
				total[kind] += v
			}
		}
	}
	return total
}

// electionMessages is how many non-heartbeat messages were sent between
// two counter snapshots.
func electionMessages(before, after map[string]float64) float64 {
	var n float64
	for kind, v := range after {
		if kind == "Heartbeat" || kind == "HeartbeatResp" {
			continue
		}
		n += v - before[kind]
	}
	return n
}

// metrics reads an agent's /metrics as series → value (labels kept in the
// series name as Prometheus prints them).
func (a *agentProc) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", a.name, err)
	}
	defer resp.Body.Close()
	return parseMetrics(bufio.NewScanner(resp.Body))
}

// goroutines reads the agent's go_goroutines from its /metrics.
func (a *agentProc) goroutines(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := a.metrics(ctx)
	if err != nil {
		return 0, err
	}
	return goroutinesOf(m, a.name)
}

// goroutinesOf picks go_goroutines out of a parsed /metrics; name says
// whose metrics they are in the error.
func goroutinesOf(m map[string]float64, name string) (float64, error) {
	g, ok := m["go_goroutines"]
	if !ok {
		return 0, fmt.Errorf("%s metrics: no go_goroutines", name)
	}
	return g, nil
}

// openFiles counts a process's open file descriptors (/proc/PID/fd).
func openFiles(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("open files: %w", err)
	}
	return len(ents), nil
}

// parseMetrics reads the Prometheus text format's sample lines.
func parseMetrics(sc *bufio.Scanner) (map[string]float64, error) {
	out := make(map[string]float64)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// procSample is a process's CPU time and memory at one moment.
type procSample struct {
	at     time.Time
	cpu    time.Duration // utime + stime
	rssKB  int64
	hwmKB  int64
	exists bool
}

// readProc samples /proc/PID/stat and /proc/PID/status.
func readProc(pid int) procSample {
	s := procSample{at: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are fields 14 and 15 of the whole line.
	line := string(b)
	rest := line[strings.LastIndexByte(line, ')')+2:]
	f := strings.Fields(rest)
	if len(f) < 13 {
		return s
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	s.cpu = time.Duration(ut+st) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			s.rssKB, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			s.hwmKB, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	s.exists = true
	return s
}

// firstNotLeaderSince returns when agent a's watch stream first said,
// after t, that a does not lead, from the watch lines the cluster keeps
// (agentProc.history).
func (a *agentProc) firstNotLeaderSince(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, o := range a.history {
		if o.at.After(t) && o.st.Role != "leader" {
			return o.at, true
		}
	}
	return time.Time{}, false
}
