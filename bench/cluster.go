package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// profile is a set of agent timings the report measures under one name.
type profile struct {
	Name  string   `json:"name"`
	Flags []string `json:"flags"` // agent flags beyond addresses and names
}

var (
	// defaultProfile is the agent's built-in defaults: no timing flags.
	defaultProfile = profile{Name: "default"}
	// fastProfile is the documented low-latency profile for loopback or a
	// single rack (README, config.example.toml).
	fastProfile = profile{Name: "fast", Flags: []string{
		"-detector.heartbeat_interval=10ms",
		"-election.election_timeout=50ms",
		"-detector.acceptable_pause=20ms",
		"-detector.min_std_dev=5ms",
		"-gossip.profile=local",
	}}
	// frugalProfile is the documented low-cost profile (config.example.toml):
	// a quarter of the default heartbeats and gossip at memberlist's WAN
	// pace, for hosts where an idle agent must stay under 1 % of a core and
	// a failover of about half a second is acceptable.
	frugalProfile = profile{Name: "frugal", Flags: []string{
		"-detector.heartbeat_interval=200ms",
		"-election.election_timeout=600ms",
		"-gossip.profile=wan",
	}}
)

// agentStatus is the part of a /v1/status or /v1/watch line the bench reads.
type agentStatus struct {
	Node   string `json:"node"`
	Role   string `json:"role"`
	Leader string `json:"leader"`
	Epoch  uint64 `json:"epoch"`
}

// observation is one watch line and when the bench received it.
type observation struct {
	at time.Time
	st agentStatus
}

// agentProc is one agent of a cluster: its configuration and, while it
// runs, its process and watch stream.
type agentProc struct {
	name    string
	id      int
	dataDir string
	socket  string
	gossip  string
	listen  string
	args    []string
	http    *http.Client

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped

	mu      sync.Mutex
	last    observation   // newest watch line since the current start
	watched bool          // a watch line arrived since the current start
	history []observation // recent watch lines, newest last (bounded)
}

// cluster is a set of real agent processes on loopback, each watched over
// its socket so that every change is timestamped as it arrives.
type cluster struct {
	bin     string
	dir     string
	proto   string
	env     []string
	agents  []*agentProc
	proxies []*jitterProxy

	changed chan struct{} // poked (non-blocking) on every watch line
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// clusterSpec says what cluster to start.
type clusterSpec struct {
	Bin      string
	Dir      string // fresh folder for data, sockets and logs
	N        int
	Protocol string
	Profile  profile
	Voters   int            // majority voters (0: all)
	Jitter   *jitterOptions // nil: agents dial each other directly
	Extra    []string       // more agent flags
	// StartFirst, when positive, starts only the first StartFirst agents;
	// the caller starts the others (cluster.start).
	StartFirst int
	// Env is added to every agent's environment (the floor guard's test
	// plants a cost with it).
	Env []string
}

// newCluster configures and starts spec.N agents n1…nN with ids 1…N, each
// joining all the others.
func newCluster(ctx context.Context, spec clusterSpec) (*cluster, error) {
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &cluster{bin: spec.Bin, dir: spec.Dir, proto: spec.Protocol, env: spec.Env, changed: make(chan struct{}, 1), ctx: cctx, cancel: cancel}
	var names, binds []string
	for i := 1; i <= spec.N; i++ {
		port, err := freePort()
		if err != nil {
			cancel()
			return nil, err
		}
		names = append(names, fmt.Sprintf("n%d", i))
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", port))
	}
	voters := names
	if spec.Voters > 0 && spec.Voters < len(names) {
		voters = names[:spec.Voters]
	}
	for i, name := range names {
		port, err := freePort()
		if err != nil {
			cancel()
			return nil, err
		}
		a := &agentProc{
			name:    name,
			id:      i + 1,
			dataDir: filepath.Join(spec.Dir, name),
			gossip:  binds[i],
			listen:  fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port),
		}
		a.socket = filepath.Join(a.dataDir, "agent.sock")
		a.http = unixHTTPClient(a.socket)
		var join []string
		for j, b := range binds {
			if j != i {
				join = append(join, b)
			}
		}
		// Join a few members, not all: that is how operators configure
		// large clusters, and gossip spreads the rest.
		if len(join) > 4 {
			join = join[:4]
		}
		a.args = []string{
			"run",
			"-node.name=" + name,
			fmt.Sprintf("-node.id=%d", a.id),
			"-node.data_dir=" + a.dataDir,
			"-gossip.bind=" + a.gossip,
			"-gossip.join=" + strings.Join(join, ","),
			"-transport.listen=" + a.listen,
			"-election.protocol=" + spec.Protocol,
			"-election.voters=" + strings.Join(voters, ","),
			"-api.socket=" + a.socket,
			"-log.level=info",
		}
		if spec.Jitter != nil {
			p, err := startJitterProxy(cctx, "127.0.0.1:"+fmt.Sprint(port), *spec.Jitter, int64(i+1))
			if err != nil {
				cancel()
				c.stop()
				return nil, err
			}
			c.proxies = append(c.proxies, p)
			a.args = append(a.args, "-transport.advertise=/ip4/127.0.0.1/tcp/"+fmt.Sprint(p.port()))
		}
		a.args = append(a.args, spec.Profile.Flags...)
		a.args = append(a.args, spec.Extra...)
		c.agents = append(c.agents, a)
	}
	for i := range c.agents {
		if spec.StartFirst > 0 && i >= spec.StartFirst {
			break
		}
		if err := c.start(i); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// start starts agent i (again, after a kill, from its data directory) and
// its watch stream.
func (c *cluster) start(i int) error {
	a := c.agents[i]
	if a.running() {
		return fmt.Errorf("cluster: %s is already running", a.name)
	}
	f, err := os.OpenFile(filepath.Join(c.dir, a.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cmd := exec.Command(c.bin, a.args...)
	cmd.Dir = c.dir
	if len(c.env) > 0 {
		cmd.Env = append(os.Environ(), c.env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("cluster: start %s: %w", a.name, err)
	}
	done := make(chan struct{})
	a.mu.Lock()
	a.cmd, a.done, a.watched = cmd, done, false
	a.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	c.wg.Add(1)
	go c.watch(a, done)
	return nil
}

// running reports whether the agent's process has not exited.
func (a *agentProc) running() bool {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// pid is the agent's current process id (0 when never started).
func (a *agentProc) pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil || a.cmd.Process == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// kill SIGKILLs the agent and waits until it is reaped; it returns the
// time just before the signal.
func (c *cluster) kill(i int) time.Time {
	a := c.agents[i]
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	t0 := time.Now()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		<-done
	}
	return t0
}

// watch follows agent a's /v1/watch stream for as long as the process that
// was started with done runs, reconnecting while the socket comes up.
func (c *cluster) watch(a *agentProc, done chan struct{}) {
	defer c.wg.Done()
	for {
		select {
		case <-done:
			return
		case <-c.ctx.Done():
			return
		default:
		}
		ctx, cancel := context.WithCancel(c.ctx)
		go func() {
			select {
			case <-done:
			case <-ctx.Done():
			}
			cancel()
		}()
		err := c.readWatch(ctx, a)
		cancel()
		if err != nil {
			select {
			case <-done:
				return
			case <-c.ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// readWatch reads one watch stream until it ends.
func (c *cluster) readWatch(ctx context.Context, a *agentProc) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/v1/watch", nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch %s: %s", a.name, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		at := time.Now()
		var st agentStatus
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			return fmt.Errorf("watch %s: %w", a.name, err)
		}
		a.mu.Lock()
		a.last, a.watched = observation{at: at, st: st}, true
		if len(a.history) >= 256 {
			a.history = append(a.history[:0], a.history[128:]...)
		}
		a.history = append(a.history, a.last)
		a.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// latest returns agent a's newest watch line, if one arrived since its
// current start.
func (a *agentProc) latest() (observation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.watched
}

// agreement is a moment when every watched agent reports the same leader.
type agreement struct {
	Leader string
	Epoch  uint64
	At     time.Time // receive time of the newest line that completed it
}

// agreed reports whether every running agent except those in skip reports
// the same non-empty leader in the same epoch, that leader itself says it
// leads, and cond accepts it.
func (c *cluster) agreed(skip map[int]bool, cond func(agreement) bool) (agreement, bool) {
	var ag agreement
	leaderSaysSo := false
	for i, a := range c.agents {
		if skip[i] || !a.running() {
			continue
		}
		o, ok := a.latest()
		if !ok || o.st.Leader == "" {
			return agreement{}, false
		}
		if ag.Leader == "" {
			ag.Leader, ag.Epoch = o.st.Leader, o.st.Epoch
		} else if o.st.Leader != ag.Leader || o.st.Epoch != ag.Epoch {
			return agreement{}, false
		}
		if o.at.After(ag.At) {
			ag.At = o.at
		}
		if o.st.Node == ag.Leader && o.st.Role == "leader" {
			leaderSaysSo = true
		}
	}
	if ag.Leader == "" || !leaderSaysSo {
		return agreement{}, false
	}
	if cond != nil && !cond(ag) {
		return agreement{}, false
	}
	return ag, true
}

// waitAgreement waits up to d for agreed(skip, cond).
func (c *cluster) waitAgreement(d time.Duration, skip map[int]bool, cond func(agreement) bool) (agreement, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond) // also catches processes that died
	defer poll.Stop()
	for {
		if ag, ok := c.agreed(skip, cond); ok {
			return ag, nil
		}
		select {
		case <-c.changed:
		case <-poll.C:
		case <-deadline.C:
			return agreement{}, fmt.Errorf("no agreement on a leader within %v: %s", d, c.describe())
		case <-c.ctx.Done():
			return agreement{}, c.ctx.Err()
		}
	}
}

// waitStable waits until all running agents have agreed on one leader and
// epoch continuously for hold (so detectors have samples), within d.
func (c *cluster) waitStable(d, hold time.Duration) (agreement, error) {
	deadline := time.Now().Add(d)
	for {
		ag, err := c.waitAgreement(time.Until(deadline), nil, nil)
		if err != nil {
			return agreement{}, err
		}
		stable := true
		end := time.Now().Add(hold)
		for time.Now().Before(end) {
			time.Sleep(20 * time.Millisecond)
			now, ok := c.agreed(nil, nil)
			if !ok || now.Leader != ag.Leader || now.Epoch != ag.Epoch {
				stable = false
				break
			}
		}
		if stable {
			return ag, nil
		}
		if time.Now().After(deadline) {
			return agreement{}, fmt.Errorf("no leader stable for %v within %v: %s", hold, d, c.describe())
		}
	}
}

// index returns the position of the agent called name, or -1.
func (c *cluster) index(name string) int {
	for i, a := range c.agents {
		if a.name == name {
			return i
		}
	}
	return -1
}

// describe summarises what every agent last said, for error messages.
func (c *cluster) describe() string {
	var parts []string
	for _, a := range c.agents {
		o, ok := a.latest()
		switch {
		case !a.running():
			parts = append(parts, a.name+": down")
		case !ok:
			parts = append(parts, a.name+": no watch line")
		default:
			parts = append(parts, fmt.Sprintf("%s: %s leader=%q epoch=%d", a.name, o.st.Role, o.st.Leader, o.st.Epoch))
		}
	}
	return strings.Join(parts, "; ")
}

// tally groups the running agents by what they last said (role, leader
// and epoch), largest group first, naming up to three agents of each
// group smaller than a tenth of the fleet: in a fleet that has not agreed
// yet it says who lags and on what, where describe would list hundreds.
func (c *cluster) tally() string {
	groups := map[string][]string{}
	for _, a := range c.agents {
		var key string
		o, ok := a.latest()
		switch {
		case !a.running():
			key = "down"
		case !ok:
			key = "no watch line"
		default:
			key = fmt.Sprintf("%s leader=%q epoch=%d", o.st.Role, o.st.Leader, o.st.Epoch)
		}
		groups[key] = append(groups[key], a.name)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		names := groups[k]
		part := fmt.Sprintf("%d %s", len(names), k)
		if len(names)*10 < len(c.agents) {
			part += " (" + strings.Join(names[:min(3, len(names))], ", ")
			if len(names) > 3 {
				part += ", …"
			}
			part += ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// waitAgreementTallied is waitAgreement over the whole fleet that logs
// the tally every every while it waits, so that a slow convergence says
// who was behind and on what.
func (c *cluster) waitAgreementTallied(d, every time.Duration, logf func(string, ...any)) (agreement, error) {
	deadline := time.Now().Add(d)
	for {
		chunk := min(every, time.Until(deadline))
		ag, err := c.waitAgreement(chunk, nil, nil)
		if err == nil || c.ctx.Err() != nil || time.Until(deadline) <= 0 {
			return ag, err
		}
		logf("not agreed yet: %s", c.tally())
	}
}

// stop kills every agent and proxy and waits for the watchers.
func (c *cluster) stop() {
	for i := range c.agents {
		c.kill(i)
	}
	c.cancel()
	for _, p := range c.proxies {
		p.close()
	}
	c.wg.Wait()
}

// unixHTTPClient talks HTTP to an agent's socket.
func unixHTTPClient(socket string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     time.Minute,
	}}
}

// resign asks agent a to hand leadership over.
func (a *agentProc) resign(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/v1/resign", nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s resign: %w", a.name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s resign: %s", a.name, resp.Status)
	}
	return nil
}

// nextPort is the next candidate port; ports are handed out once per run.
var (
	portMu   sync.Mutex
	nextPort = 20000 + int(time.Now().UnixNano()%5000)
)

// freePort returns a loopback port that was free for both TCP and UDP
// (memberlist needs both) a moment ago. It counts up below Linux's
// ephemeral range (32768 and up): a port the kernel picked with ":0" can
// be handed out again as the source port of some agent's outgoing
// connection before the agent that should listen on it starts, and with
// 50 agents that happened once per run.
func freePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 5000 {
		port := nextPort
		nextPort++
		if nextPort >= 32000 {
			nextPort = 20000
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("free port: none free for both TCP and UDP in 20000-31999")
}
