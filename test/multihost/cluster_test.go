package multihost

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/netns"
	"github.com/conclave-agent/conclave/membership"
)

var keep = flag.Bool("keep", false, "keep each test's folder with the agents' logs and data, and print its path")

// subnet is the hosts' LAN: 192.168/16 sorts after 127/8, which is what
// made agents publish loopback.
const subnet = "192.168.77"

// The same ports on every host, as one config file per machine has them.
const (
	gossipPort    = 7946
	transportPort = 7947
)

// waitLimit bounds every wait for the cluster to reach a state. It is a
// failure deadline, not a measured timing: figures go to docs/multihost.md.
const waitLimit = 30 * time.Second

// host is one agent on its own namespace.
type host struct {
	name    string
	id      int
	ip      string
	dir     string
	cfgPath string
	logPath string
	c       *client.Client
	// extra is appended to the config file: tables such as [[check]].
	extra string
	// priority is node.priority (0, the default, is left out).
	priority int

	cmd  *exec.Cmd
	done chan struct{}
}

// cluster is a set of hosts; the first one has no gossip.join, the others
// join it (the README's layout).
type cluster struct {
	t     testing.TB
	dir   string
	net   *netns.Net
	hosts []*host
	proto string
	// voters is election.voters on every host; nil lists every host. The
	// others join as observers.
	voters []string
	// preemptDelay is election.preempt_delay ("" leaves the default).
	preemptDelay string
	// key is gossip.key on every host: wildcard binds need one.
	key string
	// electionKeys are more keys of [election] on every host, and
	// transportKeys of [transport].
	electionKeys, transportKeys string
	// bin, when set, is the agent binary this cluster runs instead of
	// agentBin (a measurement comparing two builds in one run).
	bin string
}

func newCluster(t testing.TB, n int, proto string) *cluster {
	t.Helper()
	needHosts(t)
	dir, err := os.MkdirTemp("", "cvmh")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	nw, err := netns.Setup(context.Background(), "cvmh", subnet, names)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	key, err := membership.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, net: nw, proto: proto, key: key}
	t.Cleanup(c.close)
	for i, name := range names {
		h := &host{name: name, id: i + 1, ip: nw.Host(name).IP, dir: filepath.Join(dir, name)}
		h.cfgPath = filepath.Join(dir, name+".toml")
		h.logPath = filepath.Join(dir, name+".log")
		h.c = client.New(filepath.Join(h.dir, "agent.sock"))
		c.hosts = append(c.hosts, h)
		if err := os.MkdirAll(h.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		c.configure(h, h.id)
	}
	return c
}

// configure writes h's config file with node id id: shipped defaults but
// wildcard binds and so a cluster key, no advertise keys, every host a
// voter.
func (c *cluster) configure(h *host, id int) {
	c.t.Helper()
	var voters []string
	for _, o := range c.net.Hosts() {
		if c.voters == nil || slices.Contains(c.voters, o.Name) {
			voters = append(voters, fmt.Sprintf("%q", o.Name))
		}
	}
	var nodeExtra, electionExtra string
	if h.priority != 0 {
		nodeExtra = fmt.Sprintf("priority = %d\n", h.priority)
	}
	if c.preemptDelay != "" {
		electionExtra = fmt.Sprintf("preempt_delay = %q\n", c.preemptDelay)
	}
	electionExtra += c.electionKeys
	join := "[]"
	if h.name != "n1" {
		join = fmt.Sprintf("[%q]", fmt.Sprintf("%s:%d", c.net.Hosts()[0].IP, gossipPort))
	}
	cfg := fmt.Sprintf(`[node]
name = %q
id = %d
data_dir = %q
%s[gossip]
bind = "0.0.0.0:%d"
join = %s
key = %q
[transport]
listen = "/ip4/0.0.0.0/tcp/%d"
%s[election]
protocol = %q
voters = [%s]
%s[api]
socket = %q
[log]
level = "debug"
%s`, h.name, id, h.dir, nodeExtra, gossipPort, join, c.key, transportPort, c.transportKeys, c.proto, strings.Join(voters, ", "), electionExtra, filepath.Join(h.dir, "agent.sock"), h.extra)
	if err := os.WriteFile(h.cfgPath, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) host(name string) *host {
	for _, h := range c.hosts {
		if h.name == name {
			return h
		}
	}
	c.t.Fatalf("no host %s", name)
	return nil
}

// start runs h's agent inside its namespace.
func (c *cluster) start(h *host) {
	c.t.Helper()
	f, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s start\n", time.Now().Format("15:04:05.000"))
	bin := agentBin
	if c.bin != "" {
		bin = c.bin
	}
	cmd := c.net.Command(context.Background(), h.name, bin, "run", "-config", h.cfgPath)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		c.t.Fatalf("start %s: %v", h.name, err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	done := h.done
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
}

// cli runs the agent CLI (`agent ARGS`) inside h's namespace, as an
// operator logged in on that host would, with $CONCLAVE_SOCKET naming h's
// socket; it returns the combined output.
func (c *cluster) cli(h *host, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := c.net.Command(ctx, h.name, append([]string{agentBin}, args...)...)
	cmd.Env = append(os.Environ(), api.EnvSocket+"="+h.c.Socket())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("agent %s on %s: %w: %s", strings.Join(args, " "), h.name, err, out)
	}
	return string(out), nil
}

func (c *cluster) startAll() {
	for _, h := range c.hosts {
		c.start(h)
	}
}

func (h *host) running() bool {
	if h.cmd == nil {
		return false
	}
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// kill ends h's agent with SIGKILL and reaps it. ip netns exec execs the
// agent, so the pid is the agent's own.
func (c *cluster) kill(h *host) {
	if !h.running() {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
}

func (c *cluster) close() {
	for _, h := range c.hosts {
		c.kill(h)
		h.c.Close()
	}
	if err := c.net.Close(); err != nil {
		c.t.Errorf("removing namespaces: %v", err)
	}
	if c.t.Failed() || *keep {
		for _, h := range c.hosts {
			if b, err := os.ReadFile(h.logPath); err == nil {
				c.t.Logf("---- %s log (last 40 lines):\n%s", h.name, tail(string(b), 40))
			}
		}
	}
	if *keep {
		c.t.Logf("kept %s", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (h *host) status() (api.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return h.c.Status(ctx)
}

func (c *cluster) live() []*host {
	var out []*host
	for _, h := range c.hosts {
		if h.running() {
			out = append(out, h)
		}
	}
	return out
}

// agreement checks that every host in hs answers, sees len(hs) live
// members, names the same leader in the same epoch (above minEpoch), and
// that the leader is one of them and says so. It returns the leader or
// why not.
func agreement(hs []*host, minEpoch uint64) (string, uint64, string) {
	var (
		leader string
		epoch  uint64
		desc   strings.Builder
		ok     = true
		sts    = map[string]api.Status{}
	)
	for i, h := range hs {
		st, err := h.status()
		if err != nil {
			fmt.Fprintf(&desc, "%s: %v; ", h.name, err)
			ok = false
			continue
		}
		sts[h.name] = st
		fmt.Fprintf(&desc, "%s: role=%s leader=%q epoch=%d members=%d quorum=%d/%d; ", h.name, st.Role, st.Leader, st.Epoch, st.Members, st.Quorum.Reachable, st.Quorum.Voters)
		if i == 0 {
			leader, epoch = st.Leader, st.Epoch
		}
		if st.Leader == "" || st.Leader != leader || st.Epoch != epoch || st.Epoch <= minEpoch || st.Members != len(hs) {
			ok = false
		}
	}
	if ok {
		if ls, in := sts[leader]; !in || ls.Role != api.RoleLeader {
			ok = false
			desc.WriteString("the leader is not among them or does not say role=leader")
		}
	}
	if !ok {
		return "", 0, desc.String()
	}
	return leader, epoch, ""
}

// waitAgreement waits until the live hosts agree (see agreement).
func (c *cluster) waitAgreement(minEpoch uint64) (string, uint64) {
	c.t.Helper()
	hs := c.live()
	deadline := time.Now().Add(waitLimit)
	for {
		leader, epoch, why := agreement(hs, minEpoch)
		if why == "" {
			return leader, epoch
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d live hosts do not agree on a leader above epoch %d within %v: %s", len(hs), minEpoch, waitLimit, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, waitLimit, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newLeaderAmong is newLeader where agreement does not require the
// members count to drop (an unplugged host stays in gossip for seconds).
func (c *cluster) newLeaderAmong(hs []*host, old string, since time.Time) (string, time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	var desc string
	for time.Now().Before(deadline) {
		leader, first := "", true
		desc = ""
		for _, h := range hs {
			st, err := h.status()
			if err != nil {
				first = false
				desc += fmt.Sprintf("%s: %v; ", h.name, err)
				continue
			}
			desc += fmt.Sprintf("%s: role=%s leader=%q; ", h.name, st.Role, st.Leader)
			if st.Leader == "" || st.Leader == old || (leader != "" && st.Leader != leader) {
				first = false
			}
			leader = st.Leader
		}
		if first {
			return leader, time.Since(since)
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Fatalf("no new leader after %s within %v: %s", old, waitLimit, desc)
	return "", 0
}

// newLeader polls the given hosts until one reports a leader other than
// old and every one of them agrees, and returns it with the time from
// since to the first report of a new leader.
func (c *cluster) newLeader(hs []*host, old string, since time.Time) (string, time.Duration) {
	c.t.Helper()
	var first time.Duration
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, h := range hs {
			if st, err := h.status(); err == nil && st.Leader != "" && st.Leader != old && first == 0 {
				first = time.Since(since)
			}
		}
		if first > 0 {
			if leader, _, why := agreement(hs, 0); why == "" && leader != old {
				return leader, first
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, _, why := agreement(hs, 0)
	c.t.Fatalf("no new leader after %s within %v: %s", old, waitLimit, why)
	return "", 0
}

// watcher follows every host's watch stream (every status the agent
// publishes, not a sample) from the start of watch until stop, and keeps
// the first thing it saw that must never happen: two hosts leading one
// epoch, or a host saying it leads while its health is not passing and it
// does not say that no healthy voter can take over.
type watcher struct {
	mu      sync.Mutex
	leaders map[uint64]string // epoch → the host that led it
	bad     string            // the first violation, or ""
	stuck   map[string]int    // statuses of each host leading unhealthy with no healthy candidate
	seen    int               // statuses seen
	told    bool              // finish reported bad
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// watch starts a watcher. It reads only the hosts' clients, which never
// change, so it may run while the test starts and kills agents: a stream
// that ends (its agent was killed or is not up yet) is opened again, and
// its first status is the agent's current one.
func (c *cluster) watch() *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{leaders: map[uint64]string{}, stuck: map[string]int{}, cancel: cancel}
	for _, h := range c.hosts {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				if s, err := h.c.Watch(ctx); err == nil {
					for {
						st, err := s.Next()
						if err != nil {
							break
						}
						w.see(st)
					}
					s.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	// A test that fails before finish leaves no goroutine behind and
	// still hears what the watcher saw.
	c.t.Cleanup(func() {
		w.halt()
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.bad != "" && !w.told {
			c.t.Errorf("watcher: %s", w.bad)
		}
	})
	return w
}

func (w *watcher) see(st api.Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen++
	if st.Role != api.RoleLeader {
		return
	}
	if prev, ok := w.leaders[st.Epoch]; ok && prev != st.Node && w.bad == "" {
		w.bad = fmt.Sprintf("%s and %s both led epoch %d", prev, st.Node, st.Epoch)
	}
	w.leaders[st.Epoch] = st.Node
	if hr := st.Health; hr != nil && hr.Status != api.HealthPassing {
		if hr.NoHealthyCandidate {
			w.stuck[st.Node]++
		} else if w.bad == "" {
			w.bad = fmt.Sprintf("%s reported itself leader of epoch %d while its health was %s", st.Node, st.Epoch, hr.Status)
		}
	}
}

func (w *watcher) halt() {
	w.cancel()
	w.wg.Wait()
}

// finish stops the watcher, logs what it saw, and fails the test on a
// violation.
func (w *watcher) finish(t testing.TB) {
	t.Helper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("leaders by epoch: %v (from %d statuses watched)", w.leaders, w.seen)
	if len(w.stuck) > 0 {
		t.Logf("statuses in which a host led unhealthy because no healthy voter could take over: %v", w.stuck)
	}
	if w.bad != "" {
		w.told = true
		t.Fatal(w.bad)
	}
}

// statuses asks every host in hs for its status. desc describes every
// answer and error, for a failure message; ok is false when a host did not
// answer, and sts then holds only the answers.
func statuses(hs []*host) (sts []api.Status, desc string, ok bool) {
	var b strings.Builder
	ok = true
	for _, h := range hs {
		st, err := h.status()
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", h.name, err)
			ok = false
			continue
		}
		fmt.Fprintf(&b, "%s: role=%s leader=%q epoch=%d; ", h.name, st.Role, st.Leader, st.Epoch)
		sts = append(sts, st)
	}
	return sts, b.String(), ok
}

// leaderNotIn polls hs until every one of them names the same leader,
// not one of avoid, in the same epoch, and that leader (one of hs) says
// it leads. Unlike agreement it does not wait for gossip to count a
// killed host out. It returns the leader, its epoch and the time from
// since.
func (c *cluster) leaderNotIn(hs []*host, since time.Time, avoid ...string) (string, uint64, time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	var desc string
	for time.Now().Before(deadline) {
		var (
			sts []api.Status
			ok  bool
		)
		sts, desc, ok = statuses(hs)
		leads := false
		for _, st := range sts {
			if st.Leader == "" || st.Leader != sts[0].Leader || st.Epoch != sts[0].Epoch || slices.Contains(avoid, st.Leader) {
				ok = false
			}
			if st.Node == st.Leader && st.Role == api.RoleLeader {
				leads = true
			}
		}
		if ok && leads {
			return sts[0].Leader, sts[0].Epoch, time.Since(since)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no leader other than %v agreed by %d hosts within %v: %s", avoid, len(hs), waitLimit, desc)
	return "", 0, 0
}
