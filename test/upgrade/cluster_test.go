package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// Timings of the test clusters, the same as test/e2e's: shrunk so that
// failures are detected fast, with the ratios the defaults keep (election
// timeout ≥ 3 heartbeats). preempt_delay is shrunk from 5 s so that a
// returning bully or ring leader takes over within the step.
const (
	electionTimeout   = 500 * time.Millisecond
	heartbeatInterval = 50 * time.Millisecond
	preemptDelay      = time.Second
)

// Bounds, generous on purpose: the suite runs on small shared machines
// beside other packages' tests, and a bound only limits how long a cluster
// that cannot agree makes the test wait. Yet each is meaningful: a version
// break — agents that cannot read each other's messages, state records or
// config — leaves the cluster without an agreed leader however long it
// waits, and fails the step.
//
// failoverBound is from the SIGKILL of the leader (and of the agent being
// replaced) to the survivors agreeing on a new leader. Majority and bully
// take about a second here: phi suspects the leader at 50 ms heartbeats,
// then one election of 500 ms timeouts. Ring takes longer when the second
// dead agent sits on the ring: followers run no detector on each other, so
// the election round crosses it only once gossip declares it dead
// (docs/bully-ring.md: the ring needs detection). memberlist's local
// profile probes each member about once per member count of 1 s probe
// intervals, and its suspicion lasts 3 s when another member confirms it,
// up to 18 s when none does: 4–7 s were seen, about 25 s is the worst
// case, so 30 s (test/e2e's election wait).
//
// rejoinBound is from restarting the killed agents to all five agreeing:
// the restarted agents rejoin gossip through their join lists, majority's
// refuse to vote for one election timeout, and a returning bully or ring
// leader waits preempt_delay before it takes over: one to two seconds were
// seen; 20 s allows for a loaded machine.
const (
	failoverBound = 30 * time.Second
	rejoinBound   = 20 * time.Second
	exitWait      = 10 * time.Second
)

// proc is one agent process, logging to a file.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL and reaps it.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("SIGKILL pid %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
	case <-time.After(exitWait):
		t.Fatalf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, exitWait)
	}
}

// binary is an agent build: the previous release's or the tree's.
type binary struct {
	name string // the release's version, or "tree"
	path string
}

// node is one agent of a test cluster. Its config file and data directory
// stay the same across restarts; only the binary changes.
type node struct {
	name    string
	id      int
	dataDir string
	config  string
	socket  string
	log     string
	bin     binary // what it runs (or last ran)
	c       *client.Client
	p       *proc // nil before the first start
}

// cluster is five agents as real processes on loopback.
type cluster struct {
	t        testing.TB
	dir      string
	protocol string
	nodes    []*node
	// mu guards the nodes' bin, which the recorder's goroutines read
	// while the test goroutine restarts agents on other binaries.
	mu sync.Mutex
}

// newCluster writes one config file per agent — n1…nN with ids 1…N, all
// voters, each joining all the others, gossip encrypted with one key — and
// nothing starts until start. Every agent starts on bin. The config files
// are what an operator keeps across an upgrade, so both releases must
// accept them: only keys both know are written.
func newCluster(t testing.TB, n int, protocol string, bin binary, key string) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "cvu") // short: socket paths are limited to 103 bytes
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, protocol: protocol}
	t.Cleanup(c.stop)
	var names, binds []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
		port, err := loopback.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for i, name := range names {
		port, err := loopback.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{
			name:    name,
			id:      i + 1,
			dataDir: filepath.Join(dir, name),
			config:  filepath.Join(dir, name+".toml"),
			log:     filepath.Join(dir, name+".log"),
			bin:     bin,
		}
		nd.socket = filepath.Join(nd.dataDir, "agent.sock") // the default: data_dir/agent.sock
		var join []string
		for j, b := range binds {
			if j != i {
				join = append(join, fmt.Sprintf("%q", b))
			}
		}
		var voters []string
		for _, v := range names {
			voters = append(voters, fmt.Sprintf("%q", v))
		}
		conf := fmt.Sprintf(`[node]
name = %q
id = %d
data_dir = %q

[gossip]
bind = %q
join = [%s]
key = %q
profile = "local"

[transport]
listen = "/ip4/127.0.0.1/tcp/%d"

[detector]
heartbeat_interval = %q

[election]
protocol = %q
voters = [%s]
election_timeout = %q
preempt_delay = %q

[log]
level = "info"
`, name, nd.id, nd.dataDir, binds[i], strings.Join(join, ", "), key, port,
			heartbeatInterval.String(), protocol, strings.Join(voters, ", "),
			electionTimeout.String(), preemptDelay.String())
		if err := os.WriteFile(nd.config, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		nd.c = client.New(nd.socket)
		c.nodes = append(c.nodes, nd)
	}
	return c
}

// start starts nd on bin, from its config file and data directory.
func (c *cluster) start(nd *node, bin binary) {
	c.t.Helper()
	if nd.p != nil && nd.p.running() {
		c.t.Fatalf("%s is already running", nd.name)
	}
	f, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s start %s: %s run -config %s\n", time.Now().Format("15:04:05.000"), bin.name, bin.path, nd.config)
	cmd := exec.Command(bin.path, "run", "-config", nd.config)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		c.t.Fatalf("start %s on %s: %v", nd.name, bin.name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	nd.p = p
	c.mu.Lock()
	nd.bin = bin
	c.mu.Unlock()
}

// binName returns the name of the binary nd runs (or last ran).
func (c *cluster) binName(nd *node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.bin.name
}

// stop kills whatever still runs and, if the test failed, prints the end
// of every agent's log; the folder is removed.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		if nd.p != nil && nd.p.running() {
			nd.p.kill(c.t)
		}
		nd.c.Close()
	}
	if c.t.Failed() {
		for _, nd := range c.nodes {
			b, err := os.ReadFile(nd.log)
			if err != nil {
				continue
			}
			c.t.Logf("---- log of %s ----\n%s", nd.name, tail(string(b), 120))
		}
	}
	os.RemoveAll(c.dir)
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

// want returns who must lead nodes: bully and ring elect the highest id
// (every priority is 0); majority any ("").
func (c *cluster) want(nodes []*node) string {
	if c.protocol == "majority" {
		return ""
	}
	best := nodes[0]
	for _, nd := range nodes[1:] {
		if nd.id > best.id {
			best = nd
		}
	}
	return best.name
}

// agreement is what every node of a set reports once they agree.
type agreement struct {
	leader string
	epoch  uint64
}

// agreed checks that every node in nodes answers, names the same leader
// in the same epoch, above minEpoch, that the leader is among them and
// says role=leader, and that no other says so. It returns the agreement
// or a description of the disagreement.
func agreed(nodes []*node, minEpoch uint64) (agreement, string) {
	var (
		a    agreement
		desc bytes.Buffer
		ok   = true
		sts  = map[string]api.Status{}
	)
	for i, nd := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := nd.c.Status(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&desc, "%s (%s): %v; ", nd.name, nd.bin.name, err)
			ok = false
			continue
		}
		sts[nd.name] = st
		fmt.Fprintf(&desc, "%s (%s): role=%s leader=%q epoch=%d; ", nd.name, nd.bin.name, st.Role, st.Leader, st.Epoch)
		if i == 0 {
			a = agreement{st.Leader, st.Epoch}
		}
		if st.Leader == "" || st.Leader != a.leader || st.Epoch != a.epoch || st.Epoch <= minEpoch {
			ok = false
		}
	}
	if ok {
		if ls, in := sts[a.leader]; !in || ls.Role != api.RoleLeader {
			ok = false
			desc.WriteString("the leader is not among them or does not say role=leader; ")
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

// waitAgreed waits up to bound for nodes to agree on a leader (want, when
// not "") in an epoch above minEpoch, and returns the agreement and how
// long it took; it fails the test with the last view otherwise.
func (c *cluster) waitAgreed(what string, nodes []*node, minEpoch uint64, want string, bound time.Duration) (agreement, time.Duration) {
	c.t.Helper()
	start := time.Now()
	for {
		// An agent that exited will not come back: say why at once (a
		// release that cannot read the other's data directory stops
		// here, with the reason in its log).
		for _, nd := range nodes {
			if !nd.p.running() {
				b, _ := os.ReadFile(nd.log)
				c.t.Fatalf("%s: %s (%s) exited (%v); the end of its log:\n%s", what, nd.name, nd.bin.name, nd.p.cmd.ProcessState, tail(string(b), 10))
			}
		}
		a, why := agreed(nodes, minEpoch)
		if why == "" && (want == "" || a.leader == want) {
			return a, time.Since(start)
		}
		if why == "" {
			why = fmt.Sprintf("all agree on %s in epoch %d, want %s", a.leader, a.epoch, want)
		}
		if time.Since(start) > bound {
			c.t.Fatalf("%s: %d agents did not agree on a leader %q in an epoch above %d within %v; last view: %s", what, len(nodes), want, minEpoch, bound, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// askWithCLI runs bin's `agent status -json` against nd's socket and
// returns the answer, decoded with the tree's api types: one release's
// client reading the other's agent.
func askWithCLI(t testing.TB, bin binary, nd *node) api.Status {
	t.Helper()
	out, err := exec.Command(bin.path, "status", "-json", "-socket", nd.socket).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s's `agent status -json` asking %s (%s): %v: %s", bin.name, nd.name, nd.bin.name, err, stderr)
	}
	var st api.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("%s's `agent status -json` asking %s (%s): decoding %q: %v", bin.name, nd.name, nd.bin.name, out, err)
	}
	return st
}
