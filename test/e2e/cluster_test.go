package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/loopback"
)

// Timings of the test clusters: shrunk so that failures are detected fast,
// with the ratios the defaults keep (election timeout ≥ 3 heartbeats).
const (
	electionTimeout   = 500 * time.Millisecond
	heartbeatInterval = 50 * time.Millisecond
)

// Bounded waits for liveness. They are generous on purpose: the suite runs
// on small shared machines, and they only bound how long a broken agent
// can make a test hang.
const (
	electWait = 30 * time.Second
	exitWait  = 10 * time.Second
)

// keep leaves the test folders (agents' logs and data) in place, to read
// after the run.
var keep = flag.Bool("keep", false, "keep each test's folder with the agents' logs and data, and print its path")

// shortTempDir makes a temporary folder with a short path (sockets are
// limited to 103 bytes), removed when the test ends unless -keep.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if *keep {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// freePort returns a loopback port free for TCP and UDP.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// proc is one child process (an agent or a CLI command) whose combined
// output goes to a log file.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited and been reaped
	err     error         // Wait's result, valid after done
}

// startProc starts bin with args in dir (empty: the test's), logging to
// logPath (appended to, so a restarted node keeps one log).
func startProc(t testing.TB, name, dir, logPath string, env []string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s start: %s %s\n", time.Now().Format("15:04:05.000"), filepath.Base(agentBin), strings.Join(args, " "))
	cmd := exec.Command(agentBin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process (ignored once it has exited).
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// wait waits up to d for the process to exit and returns its exit code
// (-1 when a signal ended it); it fails the test on timeout.
func (p *proc) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s (pid %d) still running after %v", p.name, p.pid(), d)
	}
	return p.cmd.ProcessState.ExitCode()
}

// kill ends the process with SIGKILL (waking it first if stopped) and
// reaps it.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	<-p.done
}

// log returns the process's log so far.
func (p *proc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// node is one agent of a test cluster.
type node struct {
	name    string
	id      int
	dataDir string
	socket  string
	gossip  string // host:port
	listen  string // libp2p multiaddr
	args    []string
	c       *client.Client
	p       *proc // the current process; nil before the first start
}

// cluster is a set of agents started as real processes on loopback.
type cluster struct {
	t        testing.TB
	dir      string
	protocol string
	nodes    []*node
	extra    []*proc // other processes to stop at the end (agent exec, …)
	mu       sync.Mutex
}

// newCluster configures n agents named n1…nN with ids 1…N (all voters in
// majority), each joining all the others, with shrunk timings. Extra flags
// are added to every agent's command line. Nothing starts until start.
func newCluster(t testing.TB, n int, protocol string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: shortTempDir(t), protocol: protocol}
	var names, binds []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	}
	for i, name := range names {
		nd := &node{
			name:    name,
			id:      i + 1,
			dataDir: filepath.Join(c.dir, name),
			gossip:  binds[i],
			listen:  fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freePort(t)),
		}
		nd.socket = filepath.Join(nd.dataDir, "agent.sock")
		var join []string
		for j, b := range binds {
			if j != i {
				join = append(join, b)
			}
		}
		nd.args = []string{
			"run",
			"-node.name=" + name,
			fmt.Sprintf("-node.id=%d", nd.id),
			"-node.data_dir=" + nd.dataDir,
			"-gossip.bind=" + nd.gossip,
			"-gossip.join=" + strings.Join(join, ","),
			"-gossip.profile=local",
			"-transport.listen=" + nd.listen,
			"-election.protocol=" + protocol,
			"-election.voters=" + strings.Join(names, ","),
			"-election.election_timeout=" + electionTimeout.String(),
			"-detector.heartbeat_interval=" + heartbeatInterval.String(),
			"-api.socket=" + nd.socket,
			"-log.level=info",
		}
		nd.args = append(nd.args, extra...)
		nd.c = client.New(nd.socket)
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(c.stop)
	return c
}

// startAll starts every agent.
func (c *cluster) startAll() {
	c.t.Helper()
	for i := range c.nodes {
		c.start(i)
	}
}

// start starts agent i (again, after a kill, from its data directory).
func (c *cluster) start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.p != nil && nd.p.running() {
		c.t.Fatalf("%s is already running", nd.name)
	}
	nd.p = startProc(c.t, nd.name, c.dir, filepath.Join(c.dir, nd.name+".log"), nil, nd.args...)
}

// spawn starts a helper process whose log goes next to the agents' and
// which is killed at the end.
func (c *cluster) spawn(name string, env []string, args ...string) *proc {
	c.t.Helper()
	p := startProc(c.t, name, c.dir, filepath.Join(c.dir, name+".log"), env, args...)
	c.mu.Lock()
	c.extra = append(c.extra, p)
	c.mu.Unlock()
	return p
}

// stop kills whatever still runs and, if the test failed, prints every
// log.
func (c *cluster) stop() {
	c.mu.Lock()
	extra := c.extra
	c.mu.Unlock()
	for _, p := range extra {
		if p.running() {
			p.signal(c.t, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(exitWait):
				p.kill(c.t)
			}
		}
	}
	for _, nd := range c.nodes {
		if nd.p != nil {
			nd.p.kill(c.t)
		}
		nd.c.Close()
	}
	if c.t.Failed() {
		for _, nd := range c.nodes {
			if nd.p != nil {
				c.t.Logf("---- log of %s ----\n%s", nd.name, tail(nd.p.log(), 200))
			}
		}
		for _, p := range extra {
			c.t.Logf("---- log of %s ----\n%s", p.name, tail(p.log(), 100))
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d lines skipped", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// live returns the nodes whose process runs.
func (c *cluster) live() []*node {
	var out []*node
	for _, nd := range c.nodes {
		if nd.p != nil && nd.p.running() {
			out = append(out, nd)
		}
	}
	return out
}

// byName returns the node called name, or nil.
func (c *cluster) byName(name string) *node {
	for _, nd := range c.nodes {
		if nd.name == name {
			return nd
		}
	}
	return nil
}

// status asks nd for its status, with a short timeout.
func (nd *node) status() (api.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return nd.c.Status(ctx)
}

// agreement is what every node of a set reports once they agree.
type agreement struct {
	leader string
	epoch  uint64
}

// agreed checks that every node in nodes answers, names the same leader
// with the same epoch, that the leader is among nodes and calls itself
// leader, and that epoch > minEpoch. It returns the agreement or a
// description of the disagreement.
func agreed(nodes []*node, minEpoch uint64) (agreement, string) {
	var (
		a    agreement
		desc bytes.Buffer
		ok   = true
		sts  = map[string]api.Status{}
	)
	for i, nd := range nodes {
		st, err := nd.status()
		if err != nil {
			fmt.Fprintf(&desc, "%s: %v; ", nd.name, err)
			ok = false
			continue
		}
		sts[nd.name] = st
		fmt.Fprintf(&desc, "%s: role=%s leader=%q epoch=%d; ", nd.name, st.Role, st.Leader, st.Epoch)
		if i == 0 {
			a = agreement{st.Leader, st.Epoch}
		}
		if st.Leader == "" || st.Leader != a.leader || st.Epoch != a.epoch || st.Epoch <= minEpoch {
			ok = false
		}
	}
	if ok {
		ls, in := sts[a.leader]
		if !in || ls.Role != api.RoleLeader {
			ok = false
			desc.WriteString("the leader is not among them or does not say role=leader")
		}
		for name, st := range sts {
			if name != a.leader && st.Role == api.RoleLeader {
				ok = false
				fmt.Fprintf(&desc, "%s also says role=leader; ", name)
			}
		}
	}
	if !ok {
		return agreement{}, desc.String()
	}
	return a, ""
}

// waitAgreement waits up to electWait for every live node to agree on a
// leader with an epoch above minEpoch, and returns it.
func (c *cluster) waitAgreement(minEpoch uint64) agreement {
	c.t.Helper()
	return c.waitLeader(minEpoch, "")
}

// waitLeader is waitAgreement for a given leader (any when want is "").
// A cluster may agree on another node for a moment while it forms (a
// bully agent that has not yet heard of higher ids), so the wait goes on
// until the expected one leads.
func (c *cluster) waitLeader(minEpoch uint64, want string) agreement {
	c.t.Helper()
	nodes := c.live()
	var last string
	deadline := time.Now().Add(electWait)
	for {
		a, why := agreed(nodes, minEpoch)
		if why == "" && (want == "" || a.leader == want) {
			return a
		}
		if why == "" {
			why = fmt.Sprintf("all agree on %s in epoch %d, want %s", a.leader, a.epoch, want)
		}
		last = why
		if time.Now().After(deadline) {
			c.t.Fatalf("no agreed leader %q with epoch > %d among %d live agents within %v; last view: %s", want, minEpoch, len(nodes), electWait, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond every 50ms for up to d, failing the test with what
// cond last reported.
func waitFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, d, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
