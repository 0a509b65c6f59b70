package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// steadyResult is a cluster left alone for a while: elections that should
// not happen, and what the agents cost meanwhile.
type steadyResult struct {
	Protocol string         `json:"protocol"`
	Profile  string         `json:"profile"`
	N        int            `json:"n"`
	Jitter   *jitterOptions `json:"jitter,omitempty"`
	Duration time.Duration  `json:"duration_ns"`
	// FormedIn is how long the cluster took from start to a stable leader.
	FormedIn time.Duration `json:"formed_in_ns"`
	// LeaderChanges counts watch lines, on any agent, naming another
	// leader or epoch (or no leader) than the one agreed at the start.
	LeaderChanges int `json:"leader_changes"`
	// ElectionsStarted sums conclave_elections_started_total over the
	// agents during the window.
	ElectionsStarted float64 `json:"elections_started"`
	// EpochBefore/After bound the window.
	EpochBefore uint64 `json:"epoch_before"`
	EpochAfter  uint64 `json:"epoch_after"`
	// Agents' CPU (share of one core) and RSS during the window; index 0
	// is the leader at the start.
	CPU   []float64 `json:"cpu_core_share"`
	RSSMB []float64 `json:"rss_mb"`
	Roles []string  `json:"roles"`
	// Running is how many agents ran through the whole window.
	Running int    `json:"running"`
	Bytes   int64  `json:"proxied_bytes,omitempty"`
	Error   string `json:"error,omitempty"`
	Stalled bool   `json:"stalled,omitempty"`
	// Load is the machine's 1-minute load average at the start and the
	// end of the window: per-process CPU time does not count other
	// processes, but a loaded machine makes every wake-up dearer.
	Load [2]float64 `json:"loadavg_1m_before_after,omitzero"`
}

// measureSteady starts n agents (behind jitter proxies when jitter is
// set), waits for a stable leader, then watches for d, counting leadership
// changes and sampling each agent's CPU and memory.
func measureSteady(ctx context.Context, o *options, protocol string, prof profile, n int, jitter *jitterOptions, d time.Duration, label string) (steadyResult, error) {
	res := steadyResult{Protocol: protocol, Profile: prof.Name, N: n, Jitter: jitter, Duration: d}
	dir := filepath.Join(o.work, fmt.Sprintf("steady-%s-%s-%d-%s", protocol, prof.Name, n, label))
	start := time.Now()
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: n, Protocol: protocol, Profile: prof, Jitter: jitter})
	if err != nil {
		return res, err
	}
	defer c.stop()
	ag, err := c.waitStable(formWait*time.Duration(max(1, n/10)), 5*time.Second)
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	formed := time.Now()
	res.FormedIn = formed.Sub(start)
	res.EpochBefore = ag.Epoch
	// Let start-up work settle (joins, first detector samples) before the
	// cost window.
	time.Sleep(10 * time.Second)
	leaderIdx := c.index(ag.Leader)
	order := []int{leaderIdx}
	for i := range c.agents {
		if i != leaderIdx {
			order = append(order, i)
		}
	}
	electionsBefore := c.sumMetric(ctx, "conclave_elections_started_total")
	res.Load[0] = loadAvg()
	startSamples := make([]procSample, n)
	for k, i := range order {
		startSamples[k] = readProc(c.agents[i].pid())
	}
	seen := make(map[string]bool)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		for _, a := range c.agents {
			a.mu.Lock()
			for _, ob := range a.history {
				if ob.at.Before(formed) {
					continue
				}
				if ob.st.Epoch != ag.Epoch || ob.st.Leader != ag.Leader {
					key := fmt.Sprintf("%s@%d/%s/%s", a.name, ob.st.Epoch, ob.st.Leader, ob.at)
					seen[key] = true
				}
			}
			a.mu.Unlock()
		}
	}
	res.Load[1] = loadAvg()
	for k, i := range order {
		end := readProc(c.agents[i].pid())
		if !end.exists || !startSamples[k].exists {
			// The agent was not running (it failed to start, or died):
			// -1 marks it, and Running says how many were.
			res.CPU = append(res.CPU, -1)
			res.RSSMB = append(res.RSSMB, -1)
		} else {
			res.Running++
			res.CPU = append(res.CPU, float64(end.cpu-startSamples[k].cpu)/float64(end.at.Sub(startSamples[k].at)))
			res.RSSMB = append(res.RSSMB, float64(end.rssKB)/1024)
		}
		role := "follower"
		if k == 0 {
			role = "leader"
		}
		res.Roles = append(res.Roles, role)
	}
	res.ElectionsStarted = c.sumMetric(ctx, "conclave_elections_started_total") - electionsBefore
	res.LeaderChanges = len(seen)
	if now, ok := c.agreed(nil, nil); ok {
		res.EpochAfter = now.Epoch
	}
	for _, p := range c.proxies {
		res.Bytes += p.forwarded()
	}
	o.logf("steady %-8s %-7s n=%d %s: %d leader changes, %.0f elections started, epoch %d→%d, leader cpu %.2f%% rss %.1f MB, load %.1f → %.1f",
		protocol, prof.Name, n, label, res.LeaderChanges, res.ElectionsStarted, res.EpochBefore, res.EpochAfter, 100*res.CPU[0], res.RSSMB[0], res.Load[0], res.Load[1])
	return res, nil
}

// sumMetric adds one metric over every running agent, and over its
// series' labels (every election's).
func (c *cluster) sumMetric(ctx context.Context, series string) float64 {
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
			if k == series || strings.HasPrefix(k, series+"{") {
				total += v
			}
		}
	}
	return total
}
