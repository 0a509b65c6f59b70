package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// healthProcs configures c's agents with a command check that passes while
// <data_dir>/healthy exists (a config file per agent: [[check]] has no
// flag), and creates the files.
func healthProcs(t *testing.T, c *cluster) {
	t.Helper()
	for _, nd := range c.nodes {
		if err := os.MkdirAll(nd.dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		setHealthy(t, nd, true)
		cfg := filepath.Join(c.dir, nd.name+".toml")
		body := fmt.Sprintf("[[check]]\nname = \"svc\"\ncommand = [\"test\", \"-e\", %q]\ninterval = \"200ms\"\ntimeout = \"200ms\"\n", filepath.Join(nd.dataDir, "healthy"))
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		nd.args = slices.Insert(nd.args, 1, "-config="+cfg)
	}
}

func setHealthy(t *testing.T, nd *node, ok bool) {
	t.Helper()
	path := filepath.Join(nd.dataDir, "healthy")
	var err error
	if ok {
		err = os.WriteFile(path, nil, 0o600)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// awaitNewLeader polls every 10 ms until the live agents agree on a leader
// not in avoid, failing if an agent reports itself leader while its health
// is not passing and it does not say nobody healthy could take over.
func awaitNewLeader(t *testing.T, c *cluster, avoid ...string) (agreement, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < electWait {
		for _, nd := range c.live() {
			st, err := nd.status()
			if err == nil && st.Role == api.RoleLeader && st.Health != nil && st.Health.Status != api.HealthPassing && !st.Health.NoHealthyCandidate {
				t.Fatalf("%s reports itself leader while %s", nd.name, st.Health.Status)
			}
		}
		if a, why := agreed(c.live(), 0); why == "" && !slices.Contains(avoid, a.leader) {
			return a, time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no agreed leader other than %v within %v", avoid, electWait)
	return agreement{}, 0
}

func maint(t *testing.T, nd *node, args ...string) {
	t.Helper()
	out, err := exec.Command(agentBin, append([]string{"maint"}, append(args, "-socket", nd.socket)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("agent maint %v on %s: %v\n%s", args, nd.name, err, out)
	}
}

// TestHealthMovesLeadershipProcesses is health-gated leadership's first demonstration
// with three agent processes: the leader's check fails, another leads;
// agent maint on the new leader moves it to the third; with both cleared,
// SIGKILL of the leader elects one of the other two. Times are logged.
func TestHealthMovesLeadershipProcesses(t *testing.T) {
	c := newCluster(t, 3, "majority")
	healthProcs(t, c)
	c.startAll()
	first, _ := awaitNewLeader(t, c)

	setHealthy(t, c.byName(first.leader), false)
	second, took := awaitNewLeader(t, c, first.leader)
	t.Logf("check failed on %s: %s leads epoch %d after %v", first.leader, second.leader, second.epoch, took.Round(time.Millisecond))

	maint(t, c.byName(second.leader), "on", "-reason", "kernel upgrade")
	third, took := awaitNewLeader(t, c, first.leader, second.leader)
	t.Logf("agent maint on %s: %s leads epoch %d after %v", second.leader, third.leader, third.epoch, took.Round(time.Millisecond))
	st, err := c.byName(second.leader).status()
	if err != nil || st.Health == nil || st.Health.Status != api.HealthMaintenance || st.Health.Maintenance.Reason != "kernel upgrade" {
		t.Fatalf("%s in maintenance: %+v %v", second.leader, st.Health, err)
	}

	setHealthy(t, c.byName(first.leader), true)
	maint(t, c.byName(second.leader), "off")
	waitFor(t, electWait, "every agent passing", func() (bool, string) {
		for _, nd := range c.live() {
			st, err := nd.status()
			if err != nil || st.Health == nil || st.Health.Status != api.HealthPassing {
				return false, fmt.Sprintf("%s: %+v %v", nd.name, st.Health, err)
			}
		}
		return true, ""
	})
	old := c.byName(third.leader)
	old.p.signal(t, syscall.SIGKILL)
	old.p.wait(t, exitWait)
	fourth, took := awaitNewLeader(t, c, third.leader)
	t.Logf("SIGKILL of %s: %s leads epoch %d after %v", third.leader, fourth.leader, fourth.epoch, took.Round(time.Millisecond))
}

// TestPreferredNodeRegainsLeadershipProcesses is health-gated leadership's second: a
// priority-10 agent leads at start, loses leadership on SIGKILL and
// regains it after its restart by a planned hand-over. The longest gap
// without a leader seen by another agent is logged.
func TestPreferredNodeRegainsLeadershipProcesses(t *testing.T) {
	c := newCluster(t, 3, "majority", "-election.preempt_delay=1s")
	pref := c.nodes[2]
	pref.args = append(pref.args, "-node.priority=10")
	c.startAll()
	c.waitLeader(0, pref.name)

	pref.p.signal(t, syscall.SIGKILL)
	pref.p.wait(t, exitWait)
	other, _ := awaitNewLeader(t, c, pref.name)
	c.start(2)
	restarted := time.Now()
	var gapStart time.Time
	var maxGap time.Duration
	for {
		if time.Since(restarted) > electWait {
			t.Fatalf("%s did not regain leadership within %v of its restart", pref.name, electWait)
		}
		st, err := c.nodes[0].status()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Leader == "" && gapStart.IsZero():
			gapStart = time.Now()
		case st.Leader != "" && !gapStart.IsZero():
			maxGap = max(maxGap, time.Since(gapStart))
			gapStart = time.Time{}
		}
		if st.Leader == pref.name && st.Epoch > other.epoch {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s (priority 10) took leadership back from %s %v after its restart (preempt_delay 1s); longest gap without a leader seen by n1: %v (election timeout %v)",
		pref.name, other.leader, time.Since(restarted).Round(time.Millisecond), maxGap, electionTimeout)
}
