package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/store"
)

// electionStatus is agent i's status of the election called name, read
// from its snapshot as the socket answers it.
func (tc *testCluster) electionStatus(i int, name string) api.Status {
	a := tc.agents[i]
	st, _ := a.loadSnapshot(a.electionNamed(name))
	return st
}

// waitElection waits until every running agent names the same leader of
// the election called name, above minEpoch, and returns that status.
func (tc *testCluster) waitElection(name string, minEpoch uint64, within time.Duration) api.Status {
	tc.t.Helper()
	deadline := time.Now().Add(within)
	var last []api.Status
	for time.Now().Before(deadline) {
		last = last[:0]
		var first api.Status
		agreed, leaders := true, 0
		for i, a := range tc.agents {
			if a == nil {
				continue
			}
			st := tc.electionStatus(i, name)
			last = append(last, st)
			if st.Role == api.RoleLeader {
				leaders++
			}
			if st.Leader == "" || st.Epoch <= minEpoch || (first.Leader != "" && (st.Leader != first.Leader || st.Epoch != first.Epoch)) {
				agreed = false
			}
			if first.Leader == "" {
				first = st
			}
		}
		if agreed && leaders == 1 {
			return first
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatalf("election %s: no agreement above epoch %d within %v; last: %+v", name, minEpoch, within, last)
	return api.Status{}
}

// Three agents run three elections whose voters and protocols differ,
// each with its own leader, epoch and state on disk. A crash fails over
// only the elections the crashed agent led; the others keep their leader
// and epoch.
func TestNamedElectionsFailOverApart(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority, "")
	bully, ring := config.ProtocolBully, config.ProtocolRing
	onlyN1N2 := []string{"n1", "n2"}
	for i := range tc.cfgs {
		tc.cfgs[i].Elections = map[string]config.NamedElection{
			"jobs":    {Protocol: &bully},
			"reports": {Voters: &onlyN1N2},
			"relay":   {Protocol: &ring},
		}
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	names := []string{"default", "jobs", "reports", "relay"}
	before := map[string]api.Status{}
	for _, name := range names {
		before[name] = tc.waitElection(name, 0, 30*time.Second)
	}
	if before["jobs"].Leader != "n3" || before["relay"].Leader != "n3" {
		t.Fatalf("bully and ring elected %s and %s, want the highest id n3", before["jobs"].Leader, before["relay"].Leader)
	}
	if l := before["reports"].Leader; l != "n1" && l != "n2" {
		t.Fatalf("reports elected %s, not one of its voters n1, n2", l)
	}
	// Each election keeps its state apart; the default one where
	// releases before named elections kept it.
	for _, name := range names {
		// Read, not store.Open: that clears the running agent's
		// temporary files.
		b, err := os.ReadFile(filepath.Join(electionDir(tc.cfgs[0].Node.DataDir, name), store.FileName))
		if err != nil {
			t.Fatal(err)
		}
		hs, err := store.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if hs.Epoch != before[name].Epoch && hs.Term != before[name].Epoch {
			t.Errorf("%s: on disk %+v, reported epoch %d", name, hs, before[name].Epoch)
		}
	}
	if _, err := os.Stat(filepath.Join(tc.cfgs[0].Node.DataDir, electionsDir, "default")); err == nil {
		t.Error("the default election's state moved under elections/")
	}

	// Crash n3: jobs and relay fail over to n2; reports keeps its leader
	// and epoch whatever default does.
	tc.stop(2, true)
	after := tc.waitElection("jobs", before["jobs"].Epoch, 30*time.Second)
	if after.Leader != "n2" {
		t.Errorf("jobs after n3's crash: %s, want n2", after.Leader)
	}
	if r := tc.waitElection("relay", before["relay"].Epoch, 30*time.Second); r.Leader != "n2" {
		t.Errorf("relay after n3's crash: %s, want n2", r.Leader)
	}
	for i := 0; i < 2; i++ {
		if st := tc.electionStatus(i, "reports"); st.Leader != before["reports"].Leader || st.Epoch != before["reports"].Epoch {
			t.Errorf("n%d: reports changed with n3's crash: %s epoch %d, was %s epoch %d", i+1, st.Leader, st.Epoch, before["reports"].Leader, before["reports"].Epoch)
		}
	}
}

// A check may gate one election and a hook run on one election's
// transitions: a failing check of jobs keeps this agent out of jobs
// alone, and jobs' hook fires with CONCLAVE_ELECTION=jobs once the check
// passes and the agent leads it.
func TestChecksAndHooksPerElection(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	dir := t.TempDir()
	gate := filepath.Join(dir, "jobs-ok")
	out := filepath.Join(dir, "hook")
	c := &tc.cfgs[0]
	c.Elections = map[string]config.NamedElection{"jobs": {}}
	c.Checks = []config.Check{{Name: "jobs-gate", Command: []string{"test", "-e", gate}, Election: "jobs",
		Interval: config.Duration(50 * time.Millisecond), Timeout: config.Duration(50 * time.Millisecond), Fall: 1, Rise: 1}}
	c.Hooks = []config.Hook{{On: config.HookLeader, Election: "jobs", Timeout: config.Duration(5 * time.Second),
		Command: []string{"sh", "-c", `echo "$CONCLAVE_ELECTION $CONCLAVE_ROLE" > ` + out}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitElection("default", 0, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if st := tc.electionStatus(0, "jobs"); st.Leader != "" || st.Health == nil || st.Health.Status != api.HealthFailing {
		t.Fatalf("jobs with its check failing: %+v, want no leader and health failing", st)
	}
	if st := tc.electionStatus(0, "default"); st.Health == nil || st.Health.Status != api.HealthPassing || len(st.Health.Checks) != 0 {
		t.Fatalf("default's health shows jobs' check: %+v", st.Health)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("jobs' hook ran before jobs had a leader")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tc.waitElection("jobs", 0, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil && string(b) == "jobs leader\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs' hook: %q, %v; want \"jobs leader\"", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The elections of one fate-sharing group are led by one agent and fail
// over together: in ring and majority elections of the group, only the
// leader of its anchor (its first election by name) stands.
func TestGroupFailsOverTogether(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority, "")
	vip, ring := "vip", config.ProtocolRing
	for i := range tc.cfgs {
		tc.cfgs[i].Elections = map[string]config.NamedElection{
			"vipa": {Group: &vip},
			"vipb": {Group: &vip, Protocol: &ring},
			"vipc": {Group: &vip},
		}
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	together := func(minEpoch map[string]uint64) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			a := tc.waitElection("vipa", minEpoch["vipa"], 30*time.Second)
			b := tc.waitElection("vipb", minEpoch["vipb"], 30*time.Second)
			c := tc.waitElection("vipc", minEpoch["vipc"], 30*time.Second)
			if a.Leader == b.Leader && b.Leader == c.Leader {
				minEpoch["vipa"], minEpoch["vipb"], minEpoch["vipc"] = a.Epoch, b.Epoch, c.Epoch
				return a.Leader
			}
			if time.Now().After(deadline) {
				t.Fatalf("the group is led apart: vip-a %s, vip-b %s, vip-c %s", a.Leader, b.Leader, c.Leader)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	epochs := map[string]uint64{}
	first := together(epochs)
	var idx int
	fmt.Sscanf(first, "n%d", &idx)
	tc.stop(idx-1, true)
	second := together(epochs)
	if second == first {
		t.Fatalf("the group stayed with %s, which crashed", first)
	}
}

// TestPriorityPerElection: an agent's [elections.NAME] priority ranks it
// in that election only. n1 prefers itself for "jobs", where bully ranks
// by priority, then id, while the default bully election, which inherits
// node.priority 0 everywhere, elects the highest id, n3. Under majority
// the leader hands "db" over to n2, whose priority there is higher, once
// it was stable for preempt_delay. (How peers learn a priority before
// they hear from its agent, from gossip metadata, is core's
// TestPriorityFromGossipPerElection.)
func TestPriorityPerElection(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolBully, "")
	high, majority, delay := 9, config.ProtocolMajority, config.Duration(time.Second)
	voters := []string{"n1", "n2", "n3"}
	for i := range tc.cfgs {
		tc.cfgs[i].Elections = map[string]config.NamedElection{
			"jobs": {},
			"db":   {Protocol: &majority, Voters: &voters, PreemptDelay: &delay},
		}
		switch i {
		case 0:
			tc.cfgs[i].Elections["jobs"] = config.NamedElection{Priority: &high}
		case 1:
			tc.cfgs[i].Elections["db"] = config.NamedElection{Protocol: &majority, Voters: &voters, PreemptDelay: &delay, Priority: &high}
		}
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	for name, want := range map[string]string{"default": "n3", "jobs": "n1"} {
		if st := tc.waitElection(name, 0, 30*time.Second); st.Leader != want {
			t.Errorf("%s elected %s, want %s", name, st.Leader, want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := tc.waitElection("db", 0, 30*time.Second)
		if st.Leader == "n2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("db is still led by %s, want n2 (priority 9 there) after preempt_delay", st.Leader)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestElectionOnSomeAgentsOnly: a named election configured on n1 and n2
// only is theirs: n3, the highest id, publishes that it does not run it,
// so bully on n1 and n2 does not wait on a candidate that never answers,
// and elects n2 and keeps it.
func TestElectionOnSomeAgentsOnly(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolBully, "")
	for i := range 2 {
		tc.cfgs[i].Elections = map[string]config.NamedElection{"jobs": {}}
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	var st api.Status
	for deadline := time.Now().Add(30 * time.Second); ; {
		a, b := tc.electionStatus(0, "jobs"), tc.electionStatus(1, "jobs")
		if a.Leader != "" && a.Leader == b.Leader && a.Epoch == b.Epoch {
			st = a
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs: n1 follows %q, n2 %q after 30 s", a.Leader, b.Leader)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Leader != "n2" {
		t.Fatalf("jobs elected %s, want n2 (n3 does not run it)", st.Leader)
	}
	if st.Members != 2 || st.Quorum.Voters != 2 {
		t.Errorf("jobs counts %d members and %d candidates, want 2 and 2: n3 does not run it", st.Members, st.Quorum.Voters)
	}
	time.Sleep(2 * time.Second)
	for i := range 2 {
		if got := tc.electionStatus(i, "jobs"); got.Leader != "n2" || got.Epoch != st.Epoch {
			t.Errorf("n%d: jobs led by %s in epoch %d, want n2 kept in epoch %d", i+1, got.Leader, got.Epoch, st.Epoch)
		}
	}
}
