package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// changeWait bounds a voter change retried while the cluster settles
// (gossip still introducing a member, a new leader committing the
// configuration it inherited).
const changeWait = 20 * time.Second

// cli runs `agent ARGS…` against nd's socket and returns its exit code and
// combined output.
func (nd *node) cli(t testing.TB, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	full := append([]string{args[0], "-socket", nd.socket}, args[1:]...)
	out, err := exec.CommandContext(ctx, agentBin, full...).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("agent %s: %v", strings.Join(full, " "), err)
	}
	return 0, string(out)
}

// voters reads nd's voter configuration through the CLI's JSON.
func (nd *node) voters(t testing.TB) (api.Voters, error) {
	t.Helper()
	code, out := nd.cli(t, "voters", "-json")
	var v api.Voters
	if code != 0 {
		return v, fmt.Errorf("agent voters on %s: exit %d: %s", nd.name, code, out)
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return v, fmt.Errorf("agent voters -json on %s: %v: %s", nd.name, err, out)
	}
	return v, nil
}

// changeVoters runs `agent voters add|remove NAME` on nd until it
// succeeds, retrying while the answer is one a settling cluster gives (no
// leader yet, a change in flight, the member not reachable yet). It
// returns the output of the successful run.
func (nd *node) changeVoters(t testing.TB, op, name string) string {
	t.Helper()
	var last string
	deadline := time.Now().Add(changeWait)
	for time.Now().Before(deadline) {
		code, out := nd.cli(t, "voters", op, name)
		if code == 0 {
			return out
		}
		last = out
		if !strings.Contains(out, "in flight") && !strings.Contains(out, "no leader") &&
			!strings.Contains(out, "not reachable") && !strings.Contains(out, "not a member this leader") &&
			!strings.Contains(out, "no longer leads") && !strings.Contains(out, "stopped leading") &&
			!strings.Contains(out, "could not reach the leader") && !strings.Contains(out, "would lose the quorum") {
			t.Fatalf("agent voters %s %s on %s: %s", op, name, nd.name, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("agent voters %s %s on %s: not done within %v; last answer: %s", op, name, nd.name, changeWait, last)
	return ""
}

// leaderWatch polls every live agent's status and fails the test if two
// agents ever say role=leader for the same epoch.
type leaderWatch struct {
	c     *cluster
	mu    sync.Mutex
	byEp  map[uint64]string
	bad   string
	stop  chan struct{}
	done  chan struct{}
	polls int
}

func watchLeaders(c *cluster) *leaderWatch {
	w := &leaderWatch{c: c, byEp: map[uint64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Only the clients, never nd.p: the test restarts agents
			// meanwhile. A stopped agent's socket does not answer.
			for _, nd := range c.nodes {
				st, err := nd.status()
				if err != nil || st.Role != api.RoleLeader {
					continue
				}
				w.mu.Lock()
				w.polls++
				if prev, ok := w.byEp[st.Epoch]; ok && prev != st.Node && w.bad == "" {
					w.bad = fmt.Sprintf("%s and %s both led epoch %d", prev, st.Node, st.Epoch)
				}
				w.byEp[st.Epoch] = st.Node
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *leaderWatch) check(t testing.TB) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bad != "" {
		t.Fatal(w.bad)
	}
	t.Logf("leadership seen in %d epochs (%d leader answers): %v", len(w.byEp), w.polls, w.byEp)
}

// TestVoterChangesAcrossFailures is runtime voter changes with real processes: 3 voters
// and 2 observers; both observers are added, one from an observer's CLI
// and one from a follower's (both forwarded to the leader); the leader and
// another original voter are killed and the remaining three elect; the
// dead two are removed; restarted with their unchanged command lines
// (which still list them as voters) they stay observers and the voter set
// stays as changed. No epoch ever has two leaders.
func TestVoterChangesAcrossFailures(t *testing.T) {
	c := newCluster(t, 5, "majority", "-election.voters=n1,n2,n3")
	c.startAll()
	w := watchLeaders(c)
	first := c.waitAgreement(0)
	t.Logf("%s leads in epoch %d", first.leader, first.epoch)

	if st, err := c.byName("n4").status(); err != nil || st.Role != api.RoleObserver {
		t.Fatalf("n4 before the change: %+v, %v; want an observer", st, err)
	}
	// From an observer's CLI: forwarded to the leader.
	out := c.byName("n4").changeVoters(t, "add", "n4")
	t.Logf("n4: agent voters add n4: %s", strings.TrimSpace(out))
	// From a voter's CLI, one that does not lead: forwarded too.
	var follower *node
	for _, name := range []string{"n1", "n2", "n3"} {
		if name != first.leader {
			follower = c.byName(name)
			break
		}
	}
	out = follower.changeVoters(t, "add", "n5")
	t.Logf("%s: agent voters add n5: %s", follower.name, strings.TrimSpace(out))
	if !strings.Contains(out, "n1 n2 n3 n4 n5") {
		t.Fatalf("after adding n5: %q, want the five voters", out)
	}
	waitFor(t, electWait, "every agent holding the five voters committed", func() (bool, string) {
		var desc strings.Builder
		ok := true
		for _, nd := range c.live() {
			v, err := nd.voters(t)
			fmt.Fprintf(&desc, "%s: %v %v pending=%v; ", nd.name, v.Voters, err, v.Pending)
			if err != nil || !slices.Equal(v.Voters, []string{"n1", "n2", "n3", "n4", "n5"}) {
				ok = false
			}
		}
		return ok, desc.String()
	})

	// Kill the leader and another original voter.
	cur := c.waitAgreement(0)
	var dead []*node
	dead = append(dead, c.byName(cur.leader))
	for _, name := range []string{"n1", "n2", "n3"} {
		if name != cur.leader {
			dead = append(dead, c.byName(name))
			break
		}
	}
	for _, nd := range dead {
		nd.p.signal(t, syscall.SIGKILL)
		nd.p.wait(t, exitWait)
	}
	t.Logf("killed %s (the leader of epoch %d) and %s", dead[0].name, cur.epoch, dead[1].name)
	second := c.waitAgreement(cur.epoch)
	t.Logf("the remaining three elected %s in epoch %d", second.leader, second.epoch)

	// Remove the dead two, from an agent that does not lead where there
	// is one.
	survivors := c.live()
	via := survivors[0]
	for _, nd := range survivors {
		if nd.name != second.leader {
			via = nd
			break
		}
	}
	for _, nd := range dead {
		out := via.changeVoters(t, "remove", nd.name)
		t.Logf("%s: agent voters remove %s: %s", via.name, nd.name, strings.TrimSpace(out))
	}
	var want []string
	for _, nd := range survivors {
		want = append(want, nd.name)
	}
	slices.Sort(want)

	// Restart the dead two with their unchanged command lines, whose
	// -election.voters still lists them.
	for _, nd := range dead {
		c.start(slices.Index(c.nodes, nd))
	}
	waitFor(t, electWait, "the restarted agents to hold the changed voter set and stay observers", func() (bool, string) {
		var desc strings.Builder
		ok := true
		for _, nd := range c.live() {
			v, err := nd.voters(t)
			st, serr := nd.status()
			fmt.Fprintf(&desc, "%s: role=%s voters=%v pending=%v %v %v; ", nd.name, st.Role, v.Voters, v.Pending, err, serr)
			if err != nil || serr != nil || !slices.Equal(v.Voters, want) || v.Pending != nil || st.Leader == "" {
				ok = false
			}
			if slices.Contains(dead, nd) && st.Role != api.RoleObserver {
				ok = false
			}
		}
		return ok, desc.String()
	})
	final := c.waitAgreement(0)
	t.Logf("after the restarts: %s leads in epoch %d, voters %v", final.leader, final.epoch, want)
	for _, nd := range dead {
		if nd.name == final.leader {
			t.Fatalf("the removed %s leads", nd.name)
		}
	}
	w.check(t)
}

// TestSettingsMismatchIsRefused gives one agent of three another election
// timeout (the majority lease rests on it): the other two elect between
// themselves, drop its election messages, and every one of them names the
// disagreement in `agent status`. A second agent runs without pre-vote,
// which is reported (the digest's extension) but keeps it in the election:
// n1 and n2 still elect.
func TestSettingsMismatchIsRefused(t *testing.T) {
	c := newCluster(t, 3, "majority")
	n3 := c.byName("n3")
	n3.args = append(n3.args, "-election.election_timeout=700ms")
	n2 := c.byName("n2")
	n2.args = append(n2.args, "-election.prevote=false")
	c.startAll()
	w := watchLeaders(c)
	waitFor(t, electWait, "n1 and n2 to agree on a leader, and every agent to show the mismatches", func() (bool, string) {
		a, why := agreed([]*node{c.byName("n1"), c.byName("n2")}, 0)
		if why != "" {
			return false, why
		}
		if a.leader == "n3" {
			t.Fatalf("n3, whose settings differ, leads")
		}
		for _, nd := range c.nodes {
			code, out := nd.cli(t, "status")
			if code != 0 || !strings.Contains(out, "PROBLEM") || !strings.Contains(out, "other settings") || !strings.Contains(out, "et=700ms") ||
				!strings.Contains(out, "election.prevote is") {
				return false, fmt.Sprintf("%s: exit %d: %s", nd.name, code, out)
			}
		}
		return true, ""
	})
	if st, err := n3.status(); err != nil || st.Leader != "" || st.Role == api.RoleLeader {
		t.Errorf("n3 follows a leader whose messages it should not take: %+v, %v", st, err)
	}
	w.check(t)
}
