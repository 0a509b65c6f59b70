package main

// The floor part: an agent's idle CPU judged as a ratio to a floor that
// runs at the same time on the same machine. Absolute CPU on this VM moves
// 1.5–5× from run to run, with the load other sessions put on its 2
// cores; a floor measured in the same windows moves with it.
//
// Three comparisons run at once:
//   - 5 majority voters at the defaults and 2 observers (7 agents, one
//     memberlist cluster) against cmd/wakefloor's bare pattern of the same
//     heartbeats over plain TCP, each process with a stock memberlist node,
//     plus 2 processes that run only a memberlist node (7 nodes, one
//     cluster);
//   - 3 idle majority voters at a 50 ms heartbeat against an idle 3-member
//     etcd cluster at a 50 ms raft heartbeat;
//   - the same at 100 ms.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// floorSpec says how to run the floor part.
type floorSpec struct {
	Windows int           // measurement windows, one after another
	Window  time.Duration // length of each
	Settle  time.Duration // idle time after every cluster formed
	// Etcd adds the idle-voters-against-etcd comparisons.
	Etcd bool
	// Libp2p adds a second wakefloor whose heartbeats ride go-libp2p
	// streams (TCP, Noise, yamux) instead of plain TCP, and the rows that
	// split an agent's cost above the plain floor into the transport's
	// share and its own; and a third over Noise-secured TCP without a
	// multiplexer, which splits the transport's share into encryption's
	// and yamux's.
	Libp2p bool
	// AgentEnv and AgentFlags are added to every agent's environment and
	// flags: the guard's test plants a cost with them.
	AgentEnv   []string
	AgentFlags []string
}

// floorRow is one comparison: an agent role against its floor, CPU per
// window as a share of one core.
type floorRow struct {
	Name     string    `json:"name"`
	Agent    string    `json:"agent"`
	Floor    string    `json:"floor"`
	AgentCPU []float64 `json:"agent_cpu"`
	FloorCPU []float64 `json:"floor_cpu"`
	// Target is the largest acceptable agent ÷ floor ratio; 0 for a row
	// that is there to be read (no target).
	Target float64 `json:"target"`
	// Note says what went wrong in the window (a leader change).
	Note string `json:"note,omitempty"`
}

// floorResult is one run of the floor part.
type floorResult struct {
	Window  time.Duration `json:"window_ns"`
	Windows int           `json:"windows"`
	Rows    []floorRow    `json:"rows"`
	Load    [2]float64    `json:"loadavg_1m_before_after"`
}

// ratios is agent ÷ floor per window (windows where the floor used no
// measurable CPU are left out).
func (r floorRow) ratios() []float64 {
	var out []float64
	for i := range min(len(r.AgentCPU), len(r.FloorCPU)) {
		if r.FloorCPU[i] > 0 {
			out = append(out, r.AgentCPU[i]/r.FloorCPU[i])
		}
	}
	return out
}

// Ratio is the median over windows of agent ÷ floor: both sides of a
// window share its load, so the ratio of a window is steadier than either
// figure, and the median drops a window that one side's hiccup spoiled.
func (r floorRow) Ratio() float64 { return median(r.ratios()) }

// Met says whether the ratio is within the target (false for a row
// without one).
func (r floorRow) Met() bool {
	if r.Target == 0 {
		return false
	}
	x := r.Ratio()
	return !math.IsNaN(x) && x <= r.Target && r.Note == ""
}

// median of xs (the mean of the middle two for an even count); NaN for
// none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuNS is a process's CPU time in nanoseconds, exact: the sum of its
// threads' run time from /proc/PID/task/*/schedstat. The tick-sampled
// utime + stime in /proc/PID/stat have a 10 ms grain, a tenth of a floor
// follower's whole share over a 15 s window.
func cpuNS(pid int) (int64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("floor: list threads of pid %d (did it exit?): %w", pid, err)
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("floor: schedstat of pid %d: %w", pid, err)
		}
		total += ns
	}
	return total, nil
}

// floorProcs is a wakefloor -hold parent and its children's pids by role.
type floorProcs struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pids  map[string][]int
}

// startWakefloor starts bin -hold with args and waits for its children.
func startWakefloor(ctx context.Context, bin, logPath string, args ...string) (*floorProcs, error) {
	cmd := exec.Command(bin, append([]string{"-hold"}, args...)...)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("floor: wakefloor log: %w", err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor: start %s: %w", bin, err)
	}
	p := &floorProcs{cmd: cmd, stdin: stdin, pids: map[string][]int{}}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
			var l struct {
				Role string `json:"role"`
				PID  int    `json:"pid"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				ready <- fmt.Errorf("floor: wakefloor printed %q: %w", sc.Text(), err)
				return
			}
			p.pids[l.Role] = append(p.pids[l.Role], l.PID)
		}
		ready <- fmt.Errorf("floor: wakefloor exited before it was ready; see %s", logPath)
	}()
	select {
	case err = <-ready:
	case <-time.After(formWait):
		err = fmt.Errorf("floor: wakefloor not ready within %v; see %s", formWait, logPath)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// stop closes the parent's standard input, which ends it and its
// children, and reaps it.
func (p *floorProcs) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// floorSide is one side of a comparison: a set of processes whose CPU
// per window is reduced to one figure (a leader's, or the median of
// several followers').
type floorSide struct {
	what string
	pids []int
}

// measureFloor runs the comparisons of spec side by side and returns one
// row per agent role.
func measureFloor(ctx context.Context, o *options, spec floorSpec) (floorResult, error) {
	res := floorResult{Window: spec.Window, Windows: spec.Windows}
	dir := filepath.Join(o.work, "floor")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("floor: %w", err)
	}
	wf, err := startWakefloor(ctx, o.wakefloorBin, filepath.Join(dir, "wakefloor.log"),
		"-followers", "4", "-interval", "50ms", "-gossip", "lan", "-observers", "2")
	if err != nil {
		return res, err
	}
	defer wf.stop()
	if len(wf.pids["leader"]) != 1 || len(wf.pids["follower"]) != 4 || len(wf.pids["observer"]) != 2 {
		return res, fmt.Errorf("floor: wakefloor started %v, want a leader, 4 followers and 2 observers", wf.pids)
	}
	var lp, nf *floorProcs
	if spec.Libp2p {
		// The transport floors: a leader and 4 followers each, no
		// observers (they would only repeat the plain floor's).
		for _, f := range []struct {
			procs **floorProcs
			flag  string
		}{{&lp, "-libp2p"}, {&nf, "-noise"}} {
			p, err := startWakefloor(ctx, o.wakefloorBin, filepath.Join(dir, "wakefloor"+f.flag+".log"),
				"-followers", "4", "-interval", "50ms", "-gossip", "lan", f.flag)
			if err != nil {
				return res, err
			}
			defer p.stop()
			if len(p.pids["leader"]) != 1 || len(p.pids["follower"]) != 4 {
				return res, fmt.Errorf("floor: wakefloor %s started %v, want a leader and 4 followers", f.flag, p.pids)
			}
			*f.procs = p
		}
	}
	// The defaults' heartbeat is 50 ms: the wakefloor pattern above.
	maj, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: filepath.Join(dir, "majority"), N: 7, Voters: 5,
		Protocol: "majority", Profile: defaultProfile, Env: spec.AgentEnv, Extra: spec.AgentFlags})
	if err != nil {
		return res, err
	}
	defer maj.stop()

	type etcdPair struct {
		hb     time.Duration
		agents *cluster
		etcd   *etcdCluster
	}
	var pairs []*etcdPair
	defer func() {
		for _, p := range pairs {
			if p.agents != nil {
				p.agents.stop()
			}
			if p.etcd != nil {
				p.etcd.close()
			}
		}
	}()
	if spec.Etcd {
		for _, hb := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
			p := &etcdPair{hb: hb}
			pairs = append(pairs, p)
			prof := profile{Name: "hb" + hb.String(), Flags: []string{
				"-detector.heartbeat_interval=" + hb.String(),
				// The configuration wants at least 3 heartbeats; the
				// default 200 ms holds that at 50 ms.
				"-election.election_timeout=" + max(200*time.Millisecond, 3*hb).String(),
			}}
			if p.agents, err = newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: filepath.Join(dir, "voters-"+hb.String()), N: 3,
				Protocol: "majority", Profile: prof, Env: spec.AgentEnv, Extra: spec.AgentFlags}); err != nil {
				return res, err
			}
			if p.etcd, err = startEtcdCluster(ctx, etcdOptions{WorkDir: dir, Heartbeat: hb, Log: o.logf}, "etcd-"+hb.String()); err != nil {
				return res, err
			}
		}
	}

	// Every cluster must have a settled leader before the settling time.
	if _, err := maj.waitStable(formWait, stableHold); err != nil {
		return res, fmt.Errorf("floor: majority cluster: %w", err)
	}
	for _, p := range pairs {
		if _, err := p.agents.waitStable(formWait, stableHold); err != nil {
			return res, fmt.Errorf("floor: voters at %v: %w", p.hb, err)
		}
	}
	o.logf("floor: every cluster formed; settling %v, then %d windows of %v", spec.Settle, spec.Windows, spec.Window)
	select {
	case <-time.After(spec.Settle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	// Roles are read after the settling time: a leader may have changed
	// during it, and the windows must see who leads during them.
	majAg, err := maj.waitAgreement(electWait, nil, nil)
	if err != nil {
		return res, fmt.Errorf("floor: majority cluster after settling: %w", err)
	}
	majLeader := maj.index(majAg.Leader)
	type agentRoles struct {
		c      *cluster
		ag     agreement
		leader int
	}
	pairRoles := make([]agentRoles, len(pairs))
	etcdLeader := make([]int, len(pairs))
	for k, p := range pairs {
		ag, err := p.agents.waitAgreement(electWait, nil, nil)
		if err != nil {
			return res, fmt.Errorf("floor: voters at %v after settling: %w", p.hb, err)
		}
		pairRoles[k] = agentRoles{c: p.agents, ag: ag, leader: p.agents.index(ag.Leader)}
		if etcdLeader[k], err = p.etcd.leaderIndex(ctx); err != nil {
			return res, err
		}
	}

	pidsOf := func(c *cluster, idx ...int) []int {
		var out []int
		for _, i := range idx {
			out = append(out, c.agents[i].pid())
		}
		return out
	}
	others := func(except, from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			if i != except {
				out = append(out, i)
			}
		}
		return out
	}
	type comparison struct {
		row          floorRow
		agent, floor floorSide
	}
	cmps := []*comparison{
		{row: floorRow{Name: "majority leader", Target: 1.3},
			agent: floorSide{"leader of 5 voters + 2 observers, defaults", pidsOf(maj, majLeader)},
			floor: floorSide{"wakefloor leader (50 ms, 4 followers) + memberlist LAN", wf.pids["leader"]}},
		{row: floorRow{Name: "majority followers (median of 4)", Target: 1.3},
			agent: floorSide{"the other 4 voters", pidsOf(maj, others(majLeader, 0, 5)...)},
			floor: floorSide{"wakefloor followers + memberlist LAN", wf.pids["follower"]}},
		{row: floorRow{Name: "observers (median of 2)", Target: 1.2},
			agent: floorSide{"2 observers of the same cluster", pidsOf(maj, 5, 6)},
			floor: floorSide{"bare memberlist LAN nodes of the wakefloor cluster", wf.pids["observer"]}},
	}
	for k, p := range pairs {
		r := pairRoles[k]
		var etcdFollowers []int
		for i, m := range p.etcd.members {
			if i != etcdLeader[k] {
				etcdFollowers = append(etcdFollowers, m.proc.cmd.Process.Pid)
			}
		}
		cmps = append(cmps,
			&comparison{row: floorRow{Name: fmt.Sprintf("idle voters, %v heartbeat: leader", p.hb), Target: 1},
				agent: floorSide{fmt.Sprintf("leader of 3 voters (heartbeat %v)", p.hb), pidsOf(r.c, r.leader)},
				floor: floorSide{fmt.Sprintf("etcd raft leader of 3 idle members (heartbeat %v)", p.hb), []int{p.etcd.members[etcdLeader[k]].proc.cmd.Process.Pid}}},
			&comparison{row: floorRow{Name: fmt.Sprintf("idle voters, %v heartbeat: followers (median of 2)", p.hb), Target: 1},
				agent: floorSide{"the other 2 voters", pidsOf(r.c, others(r.leader, 0, 3)...)},
				floor: floorSide{"the 2 etcd followers", etcdFollowers}})
	}
	if lp != nil {
		// Appended after the rows above: their places are fixed (notes).
		libp2pLeader := floorSide{"wakefloor -libp2p leader (50 ms over libp2p streams, 4 followers) + memberlist LAN", lp.pids["leader"]}
		libp2pFollowers := floorSide{"wakefloor -libp2p followers + memberlist LAN", lp.pids["follower"]}
		cmps = append(cmps,
			&comparison{row: floorRow{Name: "majority leader against the libp2p floor"}, agent: cmps[0].agent, floor: libp2pLeader},
			&comparison{row: floorRow{Name: "majority followers against the libp2p floor"}, agent: cmps[1].agent, floor: libp2pFollowers},
			&comparison{row: floorRow{Name: "the libp2p floor's leader against the plain floor"}, agent: libp2pLeader, floor: cmps[0].floor},
			&comparison{row: floorRow{Name: "the libp2p floor's followers against the plain floor"}, agent: libp2pFollowers, floor: cmps[1].floor},
			&comparison{row: floorRow{Name: "the Noise floor's leader against the plain floor"},
				agent: floorSide{"wakefloor -noise leader (50 ms over Noise-secured TCP, no multiplexer, 4 followers) + memberlist LAN", nf.pids["leader"]}, floor: cmps[0].floor},
			&comparison{row: floorRow{Name: "the Noise floor's followers against the plain floor"},
				agent: floorSide{"wakefloor -noise followers + memberlist LAN", nf.pids["follower"]}, floor: cmps[1].floor})
	}
	var all []int
	for _, c := range cmps {
		c.row.Agent, c.row.Floor = c.agent.what, c.floor.what
		all = append(all, c.agent.pids...)
		all = append(all, c.floor.pids...)
	}
	sample := func() (map[int]int64, time.Time, error) {
		m := make(map[int]int64, len(all))
		at := time.Now()
		for _, pid := range all {
			ns, err := cpuNS(pid)
			if err != nil {
				return nil, at, err
			}
			m[pid] = ns
		}
		return m, at, nil
	}
	share := func(before, after map[int]int64, d time.Duration, side floorSide) float64 {
		var xs []float64
		for _, pid := range side.pids {
			xs = append(xs, float64(after[pid]-before[pid])/float64(d))
		}
		return median(xs)
	}
	res.Load[0] = loadAvg()
	prev, prevAt, err := sample()
	if err != nil {
		return res, err
	}
	for w := range spec.Windows {
		select {
		case <-time.After(spec.Window):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		cur, at, err := sample()
		if err != nil {
			return res, err
		}
		d := at.Sub(prevAt)
		for _, c := range cmps {
			c.row.AgentCPU = append(c.row.AgentCPU, share(prev, cur, d, c.agent))
			c.row.FloorCPU = append(c.row.FloorCPU, share(prev, cur, d, c.floor))
		}
		o.logf("floor: window %d/%d: majority leader %.2f %% vs floor %.2f %%, load %.1f", w+1, spec.Windows,
			100*cmps[0].row.AgentCPU[w], 100*cmps[0].row.FloorCPU[w], loadAvg())
		prev, prevAt = cur, at
	}
	res.Load[1] = loadAvg()

	// A leader change in a window spends CPU on an election: the rows of
	// that cluster say so instead of passing for idle.
	changed := func(c *cluster, before agreement) string {
		now, ok := c.agreed(nil, nil)
		switch {
		case !ok:
			return fmt.Sprintf("no agreed leader after the windows (%s led in epoch %d before them)", before.Leader, before.Epoch)
		case now.Leader != before.Leader || now.Epoch != before.Epoch:
			return fmt.Sprintf("the leader changed during the windows: %s in epoch %d, then %s in epoch %d", before.Leader, before.Epoch, now.Leader, now.Epoch)
		}
		return ""
	}
	note := changed(maj, majAg)
	for i := range 3 {
		cmps[i].row.Note = note
	}
	if lp != nil {
		// The two rows against the agents, first of the six added above.
		first := len(cmps) - 6
		cmps[first].row.Note, cmps[first+1].row.Note = note, note
	}
	for k, p := range pairs {
		n := changed(pairRoles[k].c, pairRoles[k].ag)
		if l, err := p.etcd.leaderIndex(ctx); err != nil || l != etcdLeader[k] {
			n = strings.TrimPrefix(n+"; etcd's raft leader changed during the windows", "; ")
		}
		cmps[3+2*k].row.Note, cmps[4+2*k].row.Note = n, n
	}
	for _, c := range cmps {
		res.Rows = append(res.Rows, c.row)
		target := fmt.Sprintf("target ≤ %.1f×", c.row.Target)
		if c.row.Target == 0 {
			target = "no target"
		}
		o.logf("floor: %-52s agent %.2f %% floor %.2f %% ratio %.2f× (%s)", c.row.Name,
			100*median(c.row.AgentCPU), 100*median(c.row.FloorCPU), c.row.Ratio(), target)
	}
	return res, nil
}

// leaderIndex asks every member for its raft status and returns the
// position of the member that leads.
func (c *etcdCluster) leaderIndex(ctx context.Context) (int, error) {
	for i, m := range c.members {
		st, err := m.status(ctx, etcdRPCTimeout)
		if err != nil {
			return -1, fmt.Errorf("floor: etcd member %s status: %w", m.name, err)
		}
		if st.Header != nil && st.Leader != 0 && st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("floor: no etcd member says it leads (logs in %s)", c.dir)
}
