package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/agent"
	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/leakcheck"
	"github.com/conclave-agent/conclave/internal/loopback"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// syncBuffer is a bytes.Buffer that a command may write from several
// goroutines while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cli runs one command in-process, as `agent args…` would, and returns its
// exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// goCLI runs a command in a goroutine; its result comes on the channel.
func goCLI(args ...string) <-chan cliResult {
	done := make(chan cliResult, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := dispatch(args, &out, &errOut)
		done <- cliResult{code, out.String(), errOut.String()}
	}()
	return done
}

// background runs a long-lived command (watch, exec, run) until the
// returned stop function cancels it; stop returns the exit code. The
// command is stopped at the end of the test at the latest.
func background(t *testing.T, stdout, stderr *syncBuffer, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- dispatchContext(ctx, args, stdout, stderr) }()
	var once sync.Once
	var code int
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Errorf("agent %s did not stop within 20s of its cancellation; stderr:\n%s", strings.Join(args, " "), stderr)
				code = -1
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return stop
}

// eventually polls cond every 20ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testFreePort returns a loopback port free for TCP and UDP.
func testFreePort(t *testing.T) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testCluster is n real agents in this process (real memberlist, libp2p,
// sockets and data directories), with shrunk timings.
type testCluster struct {
	t      *testing.T
	cfgs   []config.Config
	agents []*agent.Agent
	cancel []context.CancelFunc
	done   []chan error
}

func newTestCluster(t *testing.T, n int, protocol string) *testCluster {
	return newTestClusterWith(t, n, protocol, nil)
}

// newTestClusterWith is newTestCluster with each configuration changed by
// set (when not nil) before its agent starts.
func newTestClusterWith(t *testing.T, n int, protocol string, set func(c *config.Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	dir := t.TempDir()
	var binds, voters []string
	for i := 1; i <= n; i++ {
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", testFreePort(t)))
		voters = append(voters, fmt.Sprintf("n%d", i))
	}
	for i := range n {
		c := config.Default()
		c.Node = config.Node{Name: voters[i], ID: uint64(i + 1), DataDir: filepath.Join(dir, voters[i])}
		c.Gossip.Bind = binds[i]
		c.Gossip.Profile = config.ProfileLocal
		if i > 0 {
			c.Gossip.Join = []string{binds[0]}
		}
		c.Transport.Listen = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", testFreePort(t))
		c.Election.Protocol = protocol
		c.Election.Voters = voters
		c.Election.ElectionTimeout = config.Duration(500 * time.Millisecond)
		c.Detector.HeartbeatInterval = config.Duration(50 * time.Millisecond)
		c.API.Socket = filepath.Join(dir, voters[i], "agent.sock")
		if set != nil {
			set(&c)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		tc.cfgs = append(tc.cfgs, c)
	}
	tc.agents = make([]*agent.Agent, n)
	tc.cancel = make([]context.CancelFunc, n)
	tc.done = make([]chan error, n)
	t.Cleanup(tc.stopAll)
	for i := range n {
		tc.start(i)
	}
	return tc
}

// start starts agent i from tc.cfgs[i] (again, after stop).
func (tc *testCluster) start(i int) {
	tc.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, tc.cfgs[i], agent.Options{})
	if err != nil {
		cancel()
		tc.t.Fatalf("start n%d: %v", i+1, err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tc.agents[i], tc.cancel[i], tc.done[i] = a, cancel, done
}

// startSingle starts a one-node majority cluster, which elects itself at
// once, and returns its socket after it leads.
func startSingle(t *testing.T) (*testCluster, string) {
	t.Helper()
	tc := newTestCluster(t, 1, config.ProtocolMajority)
	tc.waitLeader(0)
	return tc, tc.socket(0)
}

func (tc *testCluster) socket(i int) string { return tc.cfgs[i].API.Socket }

// stop stops agent i (kill: like a crash) and waits for its Run.
func (tc *testCluster) stop(i int, kill bool) {
	if tc.agents[i] == nil {
		return
	}
	if kill {
		tc.agents[i].Kill()
	} else {
		tc.cancel[i]()
	}
	select {
	case err := <-tc.done[i]:
		if err != nil {
			tc.t.Errorf("n%d Run: %v", i+1, err)
		}
	case <-time.After(20 * time.Second):
		tc.t.Errorf("n%d did not stop within 20s", i+1)
	}
	tc.cancel[i]()
	tc.agents[i] = nil
}

func (tc *testCluster) stopAll() {
	for i := range tc.agents {
		tc.stop(i, false)
	}
}

func (tc *testCluster) status(i int) (api.Status, error) {
	c := client.New(tc.socket(i))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Status(ctx)
}

// waitLeader waits until every running agent names the same leader with an
// epoch above minEpoch, and that leader reports itself leader; it returns
// the leader's index and status.
func (tc *testCluster) waitLeader(minEpoch uint64) (int, api.Status) {
	tc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last map[int]api.Status
	for time.Now().Before(deadline) {
		last = map[int]api.Status{}
		leader, agreed := -1, true
		var first *api.Status
		for i, a := range tc.agents {
			if a == nil {
				continue
			}
			st, err := tc.status(i)
			if err != nil {
				tc.t.Fatalf("n%d status: %v", i+1, err)
			}
			last[i] = st
			if first == nil {
				first = &st
			}
			if st.Leader == "" || st.Epoch <= minEpoch || st.Leader != first.Leader || st.Epoch != first.Epoch {
				agreed = false
			}
			if st.Role == api.RoleLeader {
				leader = i
			}
		}
		if agreed && leader >= 0 && first.Leader == tc.cfgs[leader].Node.Name {
			return leader, last[leader]
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatalf("no agreed leader above epoch %d within 30s; last statuses: %+v", minEpoch, last)
	return -1, api.Status{}
}

// statusAt asks the agent at sock for its status.
func statusAt(t *testing.T, sock string) api.Status {
	t.Helper()
	c := client.New(sock)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// follower returns the index of a running agent other than leader.
func (tc *testCluster) follower(leader int) int {
	for i, a := range tc.agents {
		if a != nil && i != leader {
			return i
		}
	}
	tc.t.Fatal("no follower running")
	return -1
}

// jsonKeys returns the keys of the JSON object in s.
func jsonKeys(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	keys := slices.Sorted(maps.Keys(m))
	return keys
}

// TestBadFlags: a flag that does not exist, a bad value or a stray argument
// is exit 2 with the culprit named, before anything is attempted.
func TestBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-nope"}, "-nope"},
		{[]string{"members", "-json=maybe"}, "-json"},
		{[]string{"leader", "-wait", "forever"}, "-wait"},
		{[]string{"leader", "-index", "x"}, "-index"},
		{[]string{"resign", "n2"}, `unexpected argument "n2"`},
		{[]string{"status", "-json", "extra"}, `unexpected argument "extra"`},
		{[]string{"watch", "-timeout"}, "-timeout"},
		{[]string{"exec", "-grace", "soon", "--", "true"}, "-grace"},
		{[]string{"exec"}, "agent exec: no command to run"},
		{[]string{"exec", "-socket", "x"}, "agent exec: no command to run"},
		{[]string{"run", "-node.id=abc"}, "node.id"},
		{[]string{"run", "conclave.toml"}, `unexpected argument "conclave.toml"`},
		{[]string{"dev", "-nodes", "0"}, "-nodes must be between 1 and 9"},
		{[]string{"dev", "-protocol"}, "-protocol"},
		{[]string{"keygen", "-bits", "128"}, "-bits"},
		{[]string{"keygen", "now"}, `unexpected argument "now"`},
		{[]string{"version", "-v"}, "-v"},
	} {
		code, stdout, stderr := cli(t, tt.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, %q on stderr", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// TestSocketNowhere: every client command, pointed at a socket where no
// agent listens, fails with an error that names the socket.
func TestSocketNowhere(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	for _, args := range [][]string{
		{"status"}, {"status", "-consistent"}, {"members"}, {"leader"}, {"leader", "-wait", "1s"},
		{"watch"}, {"resign"},
	} {
		args = append(args, "-socket", sock)
		code, stdout, stderr := cli(t, args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, sock) || !strings.Contains(stderr, "agent "+args[0]+": ") {
			t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want exit 1 and an error naming the socket", args, code, stdout, stderr)
		}
	}
}
