package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/loopback"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/store"
)

// Options configure one chaos run.
type Options struct {
	Seed   uint64
	Rounds int
	Nodes  int
	// Control runs the schedulers with the fencing check and the UNIQUE
	// key off: the checker must then find stale or duplicate jobs.
	Control bool
	// Netns: "auto" (use network faults when possible), "off".
	Netns string
	// Freeze is how long the freeze-scheduler fault holds (0: no such
	// round).
	Freeze time.Duration
	// Schedule, when not empty, is the list of fault kinds to run in order
	// (Rounds is then its length); otherwise each round draws a kind.
	Schedule []string
	// ElectionTimeout and Heartbeat are the agents' timings; zero keeps
	// the shipped defaults.
	ElectionTimeout time.Duration
	Heartbeat       time.Duration
	// Bound is the liveness bound: a leader within it after every heal.
	Bound time.Duration
	// Dir holds binaries, data, logs, the database and the history; empty:
	// a new temporary directory.
	Dir string
	// BinDir, when set, holds prebuilt agent and scheduler binaries.
	BinDir string
	// Planted builds the agent with the conclave_unsafe tag (majority's
	// LeaseTooLong on; BinDir's agent is not used): the checker must then
	// find overlapping leases.
	Planted bool
	// ConsistentEvery is how often each agent is asked for a consistent
	// read; zero: every 100 ms.
	ConsistentEvery time.Duration
	// Out receives progress lines.
	Out io.Writer
}

// Result is where a run left its files, and what the checker found.
type Result struct {
	Dir      string
	History  string
	DB       string
	Netns    bool
	Report   *Report
	Duration time.Duration
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) signal(sig syscall.Signal) {
	if p != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *proc) exited() bool {
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type node struct {
	name    string
	dir     string
	cfgPath string
	sock    string
	log     *os.File
	c       *client.Client

	mu        sync.Mutex
	agent     *proc
	sched     *proc
	schedHold bool // the scheduler is frozen on purpose: do not restart it
	st        api.Status
	up        bool
}

func (n *node) status() (api.Status, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st, n.up
}

type harness struct {
	opt   Options
	rng   *rand.Rand
	clock monoClock
	dir   string
	bin   string // the scheduler's folder, and the agent's unless agentBin is set
	// agentBin is the agent binary.
	agentBin string
	db       string
	hist     *History
	nodes    []*node
	net      *netnsHosts
	wg       sync.WaitGroup
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.opt.Out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Run builds the binaries, starts the cluster and the schedulers, drives
// the nemesis, stops everything and checks the history.
func Run(ctx context.Context, opt Options) (*Result, error) {
	start := time.Now()
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	if opt.Nodes < 3 {
		opt.Nodes = 3
	}
	if len(opt.Schedule) > 0 {
		opt.Rounds = len(opt.Schedule)
	}
	h := &harness{opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)), clock: monoClock{base: time.Now()}}
	h.dir = opt.Dir
	if h.dir == "" {
		d, err := os.MkdirTemp("", "conclave-chaos-")
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		h.dir = d
	}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	res := &Result{Dir: h.dir, History: filepath.Join(h.dir, "history.jsonl"), DB: filepath.Join(h.dir, "jobs.db")}
	h.db = res.DB
	if err := h.build(ctx); err != nil {
		return nil, err
	}
	if opt.Netns != "off" {
		ok, why := netnsAvailable(os.Geteuid())
		if ok {
			n, err := setupNetns(ctx, h.names())
			if err != nil {
				h.logf("network namespaces unavailable (%v): process faults only", err)
			} else {
				h.net = n
				defer func() {
					if err := n.Close(); err != nil {
						h.logf("netns cleanup: %v", err)
					}
				}()
			}
		} else {
			h.logf("network faults off (%s): process faults only", why)
		}
	}
	res.Netns = h.net != nil
	hist, err := CreateHistory(res.History)
	if err != nil {
		return nil, err
	}
	h.hist = hist
	if err := h.configure(); err != nil {
		hist.Close()
		return nil, err
	}
	h.logf("chaos seed %d, %d rounds, %d agents, control=%v, planted=%v, netns=%v, dir %s", opt.Seed, opt.Rounds, opt.Nodes, opt.Control, opt.Planted, res.Netns, h.dir)

	runCtx, stop := context.WithCancel(ctx)
	for _, n := range h.nodes {
		if err := h.startAgent(n); err != nil {
			stop()
			h.shutdown()
			hist.Close()
			return nil, err
		}
	}
	for _, n := range h.nodes {
		h.wg.Add(4)
		go h.observe(runCtx, n)
		go h.readConsistent(runCtx, n)
		go h.watch(runCtx, n)
		go h.supervise(runCtx, n)
	}
	nemErr := h.nemesis(runCtx)
	stop()
	h.shutdown()
	if err := hist.Close(); err != nil {
		return nil, err
	}
	for _, n := range h.nodes {
		n.log.Close()
		n.c.Close()
	}
	if nemErr != nil && ctx.Err() == nil {
		return nil, nemErr
	}

	if res.Report, err = CheckDir(ctx, h.dir, opt.Bound); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// CheckDir checks the history and jobs table a run left in dir.
func CheckDir(ctx context.Context, dir string, bound time.Duration) (*Report, error) {
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	recs, err := ReadHistory(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	jobs, fenceEpoch, err := ReadJobs(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		return nil, err
	}
	rep := Check(recs, jobs, fenceEpoch, bound)
	if err := rep.Ops.writeVisual(dir); err != nil {
		return nil, err
	}
	return rep, nil
}

func (h *harness) names() []string {
	var out []string
	for i := 1; i <= h.opt.Nodes; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

func (h *harness) build(ctx context.Context) error {
	type target struct {
		sub, pkg, out string // module folder under the root, package, output folder
		flags         []string
	}
	var todo []target
	h.bin = h.opt.BinDir
	if h.bin == "" {
		h.bin = filepath.Join(h.dir, "bin")
		if !h.opt.Planted {
			todo = append(todo, target{".", "./cmd/agent", h.bin, nil})
		}
		// The scheduler lives in the examples module (its database drivers
		// stay out of the agent's go.mod), so it is built from there.
		todo = append(todo, target{"examples", "./scheduler", h.bin, nil})
	}
	h.agentBin = filepath.Join(h.bin, "agent")
	if h.opt.Planted {
		// A folder of its own, so that a planted binary is never mistaken
		// for a shipped one.
		planted := filepath.Join(h.dir, "bin-planted")
		h.agentBin = filepath.Join(planted, "agent")
		todo = append(todo, target{".", "./cmd/agent", planted, []string{"-tags", "conclave_unsafe"}})
	}
	if len(todo) == 0 {
		return nil
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	for _, b := range todo {
		args := append(append([]string{"build", "-o", b.out + string(filepath.Separator)}, b.flags...), b.pkg)
		h.logf("go %s (in %s)", strings.Join(args, " "), b.sub)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = filepath.Join(root, b.sub)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("chaos: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("chaos: run inside the conclave module")
	}
	return filepath.Dir(mod), nil
}

// configure writes one TOML file per agent. Without namespaces every
// address is on loopback; with them, each agent is a host on 192.168.78.x.
func (h *harness) configure() error {
	names := h.names()
	gossip := map[string]string{}
	transport := map[string]string{}
	for _, name := range names {
		if h.net != nil {
			gossip[name] = h.net.ip(name) + ":7946"
			transport[name] = "/ip4/" + h.net.ip(name) + "/tcp/7947"
			continue
		}
		gp, err := loopback.FreePort()
		if err != nil {
			return err
		}
		tp, err := loopback.FreePort()
		if err != nil {
			return err
		}
		gossip[name] = fmt.Sprintf("127.0.0.1:%d", gp)
		transport[name] = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", tp)
	}
	quoted := func(xs []string) string {
		q := make([]string, len(xs))
		for i, x := range xs {
			q[i] = fmt.Sprintf("%q", x)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	// Wildcard binds are refused without a cluster key, as an operator
	// would find; loopback runs keep the shipped keyless default, but for
	// a key rotation, which needs a key to replace.
	var key string
	if h.net != nil || slices.Contains(h.opt.Schedule, rotateKey) {
		k, err := membership.GenerateKey()
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		key = fmt.Sprintf("key = %q\n", k)
	}
	for i, name := range names {
		dir := filepath.Join(h.dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		var join []string
		for _, other := range names {
			if other != name {
				join = append(join, gossip[other])
			}
		}
		bind, listen := gossip[name], transport[name]
		if h.net != nil {
			// One config per host as an operator writes it: the same
			// ports everywhere, wildcard binds, no advertise keys.
			bind, listen = "0.0.0.0:7946", "/ip4/0.0.0.0/tcp/7947"
		}
		// Timings are the shipped defaults unless the run sets them.
		var detector, timeout string
		if h.opt.Heartbeat > 0 {
			detector = fmt.Sprintf("[detector]\nheartbeat_interval = %q\n", h.opt.Heartbeat.String())
		}
		if h.opt.ElectionTimeout > 0 {
			timeout = fmt.Sprintf("election_timeout = %q\n", h.opt.ElectionTimeout.String())
		}
		cfg := fmt.Sprintf(`[node]
name = %q
id = %d
data_dir = %q
[gossip]
bind = %q
join = %s
%s[transport]
listen = %q
%s[election]
protocol = "majority"
voters = %s
%s[api]
socket = %q
[log]
level = "info"
`, name, i+1, dir, bind, quoted(join), key, listen, detector, quoted(names), timeout, filepath.Join(dir, "agent.sock"))
		cfgPath := filepath.Join(dir, "agent.toml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		logf, err := os.OpenFile(filepath.Join(dir, "log.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		sock := filepath.Join(dir, "agent.sock")
		h.nodes = append(h.nodes, &node{name: name, dir: dir, cfgPath: cfgPath, sock: sock, log: logf, c: client.New(sock)})
	}
	return nil
}

// startAgent starts n's agent from its data directory.
func (h *harness) startAgent(n *node) error {
	argv := []string{h.agentBin, "run", "-config", n.cfgPath}
	if h.net != nil {
		argv = append([]string{"ip", "netns", "exec", h.net.Host(n.name).NS}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start agent %s: %w", n.name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	n.mu.Lock()
	n.agent = p
	n.mu.Unlock()
	h.hist.Add(Record{Kind: kindProc, Node: n.name, Detail: fmt.Sprintf("agent started pid %d", cmd.Process.Pid)})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := cmd.Wait()
		h.hist.Add(Record{Kind: kindProc, Node: n.name, Detail: fmt.Sprintf("agent exited: %v", err)})
		close(p.done)
	}()
	return nil
}

// killAgent SIGKILLs n's agent and waits for it to be gone.
func (h *harness) killAgent(n *node) {
	n.mu.Lock()
	p := n.agent
	n.mu.Unlock()
	if p == nil {
		return
	}
	p.signal(syscall.SIGCONT) // a stopped process dies only once continued on some kernels
	p.signal(syscall.SIGKILL)
	<-p.done
}

// supervise keeps one scheduler replica running beside n's agent,
// restarting it whenever it exits (it exits on every loss of leadership).
func (h *harness) supervise(ctx context.Context, n *node) {
	defer h.wg.Done()
	for ctx.Err() == nil {
		n.mu.Lock()
		hold := n.schedHold
		n.mu.Unlock()
		if hold {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		p, err := h.startScheduler(n)
		if err != nil {
			h.hist.Add(Record{Kind: kindNote, Node: n.name, Detail: err.Error()})
			sleep(ctx, time.Second)
			continue
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				p.signal(syscall.SIGKILL)
				<-p.done
			}
			return
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

func (h *harness) startScheduler(n *node) (*proc, error) {
	args := []string{"-socket", n.sock, "-db", h.db}
	if h.opt.Control {
		args = append(args, "-fence=false", "-unique=false")
	}
	cmd := exec.Command(filepath.Join(h.bin, "scheduler"), args...)
	cmd.Stderr = n.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("chaos: scheduler %s: %w", n.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: start scheduler %s: %w", n.name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	n.mu.Lock()
	n.sched = p
	n.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e struct {
				TS     int64  `json:"ts"`
				Ev     string `json:"ev"`
				Epoch  uint64 `json:"epoch"`
				Tick   int64  `json:"tick"`
				Result string `json:"result"`
				Err    string `json:"err"`
				Call   int64  `json:"call"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			r := Record{T: e.TS, Kind: kindSched, Node: n.name, Ev: e.Ev, Epoch: e.Epoch, Tick: e.Tick, Result: e.Result, Err: e.Err}
			if e.Call != 0 {
				r.Call, r.Ret = e.Call, e.TS
			}
			h.hist.Add(r)
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// observe polls n's status and hard state every 50 ms and records every
// change.
func (h *harness) observe(ctx context.Context, n *node) {
	defer h.wg.Done()
	var last Record
	var lastHS Record
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		call := h.clock.now()
		st, err := n.c.Status(qctx)
		ret := h.clock.now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.hist.Add(opRecord(n.name, opStatus, n.name+"/"+opStatus, call, ret, st, err))
		rec := Record{Kind: kindStatus, Node: n.name, Up: err == nil}
		if err == nil {
			rec.Role, rec.Leader, rec.Epoch = st.Role, st.Leader, st.Epoch
		}
		n.mu.Lock()
		n.st, n.up = st, err == nil
		n.mu.Unlock()
		if rec.Up != last.Up || rec.Role != last.Role || rec.Leader != last.Leader || rec.Epoch != last.Epoch {
			h.hist.Add(rec)
			last = rec
		}
		if b, err := os.ReadFile(filepath.Join(n.dir, store.FileName)); err == nil {
			if hs, err := store.Decode(b); err == nil {
				r := Record{Kind: kindHardState, Node: n.name, Term: hs.Term, Vote: uint64(hs.Vote), Epoch: hs.Epoch}
				if r.Term != lastHS.Term || r.Vote != lastHS.Vote || r.Epoch != lastHS.Epoch {
					h.hist.Add(r)
					lastHS = r
				}
			}
		}
	}
}

// shutdown stops every process: SIGCONT first (a frozen process cannot
// handle SIGTERM), then SIGTERM, SIGKILL after a grace period.
func (h *harness) shutdown() {
	for _, n := range h.nodes {
		n.mu.Lock()
		p := n.agent
		n.mu.Unlock()
		if p != nil {
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGTERM)
		}
	}
	for _, n := range h.nodes {
		n.mu.Lock()
		p := n.agent
		n.mu.Unlock()
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}
	h.wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
