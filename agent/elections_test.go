package agent

import (
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
