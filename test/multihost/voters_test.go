package multihost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// TestMismatchedVoterLists is an operator's voter-list mistake on real hosts:
// n1's config file says voters = ["n1"] (config.example.toml's value), n2's
// and n3's list all three. n1 is then cut off from the others, again and
// again. No epoch may ever have two leaders, and the disagreement must be
// visible in `agent status`. Then the operator follows the problem line's
// advice and the three become one cluster.
func TestMismatchedVoterLists(t *testing.T) {
	c := newCluster(t, 3, "majority")
	n1 := c.host("n1")
	onlyItself(t, n1)

	// Every host's status is polled throughout; two hosts saying
	// role=leader for one epoch fail the test.
	w := c.watch()
	c.startAll()
	// n1 is the gossip seed, so it starts alone and, a sole voter, forms
	// its own cluster at once; n2 and n3 then meet a formed cluster that
	// leaves them out and wait (the operator adds them: below). Or, if
	// gossip is quicker, n1 meets their longer list first and stands
	// down. Either way one of the two groups leads.
	waitFor(t, "a leader", func() (bool, string) {
		for _, h := range c.hosts {
			if st, err := h.status(); err == nil && st.Role == api.RoleLeader {
				return true, ""
			}
		}
		return false, "nobody leads"
	})
	waitFor(t, "the conflict to show in some host's 'agent status'", func() (bool, string) {
		var seen strings.Builder
		for _, h := range c.hosts {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, err := exec.CommandContext(ctx, agentBin, "status", "-socket", h.c.Socket()).CombinedOutput()
			cancel()
			if err != nil {
				fmt.Fprintf(&seen, "%s: %v; ", h.name, err)
				continue
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "PROBLEM") && strings.Contains(line, "[n1]") && strings.Contains(line, "n2") {
					t.Logf("%s: %s", h.name, line)
					return true, ""
				}
			}
			fmt.Fprintf(&seen, "%s: no problem line; ", h.name)
		}
		return false, seen.String()
	})

	for round := 1; round <= 3; round++ {
		if err := c.net.Unplug(context.Background(), "n1"); err != nil {
			t.Fatal(err)
		}
		// Long enough for n1's election timeouts to fire many times
		// and for gossip to declare the others dead to it.
		time.Sleep(6 * time.Second)
		st, err := n1.status()
		t.Logf("round %d: n1 cut off: role=%s leader=%q epoch=%d problems=%q (%v)", round, st.Role, st.Leader, st.Epoch, st.Problems.List(), err)
		if err := c.net.Plug(context.Background(), "n1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		for _, h := range c.hosts {
			st, err := h.status()
			t.Logf("round %d: n1 back: %s role=%s leader=%q epoch=%d (%v)", round, h.name, st.Role, st.Leader, st.Epoch, err)
		}
	}
	// The way out the problem line names: n1's cluster adds the others,
	// from n1's socket (n1 leads; the others wait to be added). When n1
	// met the longer list first and joined the others' cluster, they are
	// voters already and there is nothing to add.
	for _, name := range []string{"n2", "n3"} {
		waitFor(t, "agent voters add "+name+" on n1", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if v, err := n1.c.Voters(ctx); err == nil && v.Pending == nil && slices.Contains(v.Voters, name) {
				t.Logf("%s is a voter already on n1: %v (index %d)", name, v.Voters, v.Index)
				return true, ""
			}
			out, err := exec.CommandContext(ctx, agentBin, "voters", "-socket", n1.c.Socket(), "add", name).CombinedOutput()
			return err == nil, string(out)
		})
	}
	leader, epoch := c.waitAgreement(0)
	t.Logf("after adding n2 and n3 on n1: %s leads epoch %d", leader, epoch)
	w.finish(t)
}

// waitVoters waits until every host in hs holds the committed voter set
// want (sorted), at one configuration index above minIndex, with no change
// pending, and counts that many voters in its status; it returns the
// index.
func waitVoters(t testing.TB, hs []*host, minIndex uint64, want ...string) uint64 {
	t.Helper()
	var index uint64
	waitFor(t, fmt.Sprintf("every host to hold voters %v", want), func() (bool, string) {
		var desc strings.Builder
		ok := true
		index = 0
		for _, h := range hs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			v, err := h.c.Voters(ctx)
			cancel()
			if err != nil {
				fmt.Fprintf(&desc, "%s: %v; ", h.name, err)
				ok = false
				continue
			}
			st, err := h.status()
			if err != nil {
				fmt.Fprintf(&desc, "%s: %v; ", h.name, err)
				ok = false
				continue
			}
			fmt.Fprintf(&desc, "%s: voters %v index %d pending %v, status %d voters role %s; ", h.name, v.Voters, v.Index, v.Pending, st.Quorum.Voters, st.Role)
			if index == 0 {
				index = v.Index
			}
			if !slices.Equal(v.Voters, want) || v.Index != index || v.Index <= minIndex || v.Pending != nil || st.Quorum.Voters != len(want) {
				ok = false
			}
		}
		return ok, desc.String()
	})
	return index
}

// changeVoters runs `agent voters -json add|remove NAME` on h's host until
// it succeeds (an answer such as "no leader" or "not reachable" is logged
// and retried, as docs/operations-voters.md tells an operator to), and
// returns the configuration it answered with.
func (c *cluster) changeVoters(h *host, op, name string) api.Voters {
	c.t.Helper()
	var v api.Voters
	waitFor(c.t, "agent voters "+op+" "+name+" on "+h.name, func() (bool, string) {
		out, err := c.cli(h, "voters", "-json", op, name)
		if err != nil && ((op == "remove" && strings.Contains(err.Error(), "not a voter")) ||
			(op == "add" && strings.Contains(err.Error(), "already a voter"))) {
			// An earlier attempt that timed out here committed under
			// the next leader: the change is made, read the voters.
			out, err = c.cli(h, "voters", "-json")
		}
		if err != nil {
			c.t.Logf("%v", err)
			return false, err.Error()
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			c.t.Fatalf("agent voters -json %s %s on %s: %v\n%s", op, name, h.name, err, out)
		}
		return true, ""
	})
	return v
}

// TestVoterChangesAcrossHosts changes the voter set at run time on
// namespaced hosts: n1–n3 vote, n4 observes. `agent voters add n4` runs
// on a follower's host, so the follower forwards it across the LAN to the
// leader; every host must then hold the same four voters. SIGKILL of the
// leader leaves 3 of 4, who must elect; `agent voters remove` of the dead
// host, run on n4's host, must reach every survivor.
func TestVoterChangesAcrossHosts(t *testing.T) {
	c := newCluster(t, 4, "majority")
	c.voters = []string{"n1", "n2", "n3"}
	for _, h := range c.hosts {
		c.configure(h, h.id)
	}
	w := c.watch()
	c.startAll()
	leader, epoch := c.waitAgreement(0)
	n4 := c.host("n4")
	if st, err := n4.status(); err != nil || st.Role != api.RoleObserver {
		t.Fatalf("n4 before the change: role %q, %v; want an observer", st.Role, err)
	}
	index := waitVoters(t, c.hosts, 0, "n1", "n2", "n3")
	var follower *host
	for _, h := range c.hosts[:3] {
		if h.name != leader {
			follower = h
			break
		}
	}
	t.Logf("%s leads epoch %d; voters n1 n2 n3 at index %d; adding n4 from %s", leader, epoch, index, follower.name)

	asked := time.Now()
	v := c.changeVoters(follower, "add", "n4")
	t.Logf("agent voters add n4 on %s, %v: voters %v (index %d, term %d), taken by %s", follower.name, time.Since(asked).Round(time.Millisecond), v.Voters, v.Index, v.Term, v.Leader)
	if v.Leader == "" || v.Leader == follower.name {
		t.Errorf("the change was taken by %q: not forwarded from the follower %s to a leader", v.Leader, follower.name)
	}
	index = waitVoters(t, c.hosts, index, "n1", "n2", "n3", "n4")
	t.Logf("every host holds voters n1 n2 n3 n4 at index %d, %v after the command", index, time.Since(asked).Round(time.Millisecond))
	if st, err := n4.status(); err != nil || st.Role == api.RoleObserver {
		t.Errorf("n4 after the change: role %q, %v; want a voter", st.Role, err)
	}

	// Kill the leader: 3 of the 4 voters remain, a majority.
	leader, _, _ = c.leaderNotIn(c.hosts, time.Now())
	dead := c.host(leader)
	killed := time.Now()
	c.kill(dead)
	next, epoch, took := c.leaderNotIn(c.live(), killed, dead.name)
	t.Logf("SIGKILL of %s: %s leads epoch %d, agreed by the 3 survivors %v later", dead.name, next, epoch, took.Round(time.Millisecond))

	// Remove the dead host, from the observer that became a voter (or,
	// had it led and been killed, from a survivor).
	from := n4
	if dead == n4 {
		from = c.host(next)
	}
	var survivors []string
	for _, h := range c.live() {
		survivors = append(survivors, h.name)
	}
	asked = time.Now()
	v = c.changeVoters(from, "remove", dead.name)
	t.Logf("agent voters remove %s on %s, %v: voters %v (index %d, term %d), taken by %s", dead.name, from.name, time.Since(asked).Round(time.Millisecond), v.Voters, v.Index, v.Term, v.Leader)
	if v.Leader == "" || v.Leader == dead.name {
		t.Errorf("the change was taken by %q, want a live leader", v.Leader)
	}
	index = waitVoters(t, c.live(), index, survivors...)
	t.Logf("every survivor holds voters %v at index %d, %v after the command", survivors, index, time.Since(asked).Round(time.Millisecond))
	waitFor(t, "every survivor to reach 3 of 3 voters", func() (bool, string) {
		var desc strings.Builder
		ok := true
		for _, h := range c.live() {
			st, err := h.status()
			if err != nil {
				return false, err.Error()
			}
			fmt.Fprintf(&desc, "%s: quorum %+v; ", h.name, st.Quorum)
			ok = ok && st.Quorum.Voters == 3 && st.Quorum.Reachable == 3 && st.Quorum.Healthy
		}
		return ok, desc.String()
	})
	leader, epoch = c.waitAgreement(0)
	t.Logf("%s leads epoch %d over the 3 survivors", leader, epoch)
	w.finish(t)
}

// TestLoneSeedThenClusterStaysQuiet is the README's own path: n1 runs
// alone first (election.voters = ["n1"]), then n2 and n3 start with
// ["n1", "n2", "n3"] and join through it. n1's cluster leaves them out, so
// they must observe, quietly: no (pre-)vote traffic once they learned the
// cluster's voters, role observer naming n1 as leader, and a problem line
// with the command that fixes it. Before, they flapped between candidate
// and follower several times a second and reported themselves healthy.
func TestLoneSeedThenClusterStaysQuiet(t *testing.T) {
	c := newCluster(t, 3, "majority")
	n1 := c.host("n1")
	onlyItself(t, n1)
	w := c.watch()
	c.start(n1)
	waitFor(t, "n1 to lead alone", func() (bool, string) {
		st, err := n1.status()
		return err == nil && st.Role == api.RoleLeader, fmt.Sprintf("%+v %v", st, err)
	})
	time.Sleep(1500 * time.Millisecond)
	c.start(c.host("n2"))
	c.start(c.host("n3"))
	others := []*host{c.host("n2"), c.host("n3")}
	for _, h := range others {
		waitFor(t, h.name+" to observe n1", func() (bool, string) {
			st, err := h.status()
			return err == nil && st.Role == api.RoleObserver && st.Leader == "n1", fmt.Sprintf("%+v %v", st, err)
		})
	}
	before := make(map[string]float64)
	for _, h := range others {
		before[h.name] = electionsStarted(t, h)
	}
	time.Sleep(15 * time.Second)
	for _, h := range others {
		if n := electionsStarted(t, h) - before[h.name]; n != 0 {
			t.Errorf("%s started %v elections in 15 s while observing, want 0", h.name, n)
		}
		st, err := h.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Role != api.RoleObserver || st.Leader != "n1" || st.LeaderAgeMS < 0 {
			t.Errorf("%s: role %s leader %q, want an observer naming n1", h.name, st.Role, st.Leader)
		}
		if st.Quorum.Voters != 1 {
			t.Errorf("%s: quorum counts %d voters, want the cluster's 1 ([n1]), not its own list", h.name, st.Quorum.Voters)
		}
		fix := "'agent voters add " + h.name + "'"
		if !slices.ContainsFunc(st.Problems.List(), func(p string) bool { return strings.Contains(p, fix) }) {
			t.Errorf("%s: problems %q, want a line with %s", h.name, st.Problems.List(), fix)
		}
	}
	w.finish(t)
}

// electionsStarted reads conclave_elections_started_total of the default
// election from h's /metrics on its socket.
func electionsStarted(t *testing.T, h *host) float64 {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", h.c.Socket())
		},
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://agent/metrics")
	if err != nil {
		t.Fatalf("%s: metrics: %v", h.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: metrics: %v", h.name, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `conclave_elections_started_total{election="default"} `); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: metric line %q: %v", h.name, line, err)
			}
			return f
		}
	}
	t.Fatalf("%s: no conclave_elections_started_total in its metrics:\n%s", h.name, body)
	return 0
}

// onlyItself rewrites h's config file so that election.voters lists h
// alone (config.example.toml's value), the operator's mistake these tests
// start from.
func onlyItself(t *testing.T, h *host) {
	t.Helper()
	b, err := os.ReadFile(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	i := strings.Index(cfg, "voters = [")
	j := strings.Index(cfg[i:], "\n")
	cfg = cfg[:i] + fmt.Sprintf("voters = [%q]", h.name) + cfg[i+j:]
	if err := os.WriteFile(h.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
