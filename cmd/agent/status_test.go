package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

func TestStatus(t *testing.T) {
	_, sock := startSingle(t)

	code, stdout, stderr := cli(t, "status", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent status: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"node      n1 (id 1)\n",
		"protocol  majority\n",
		"role      leader\n",
		"leader    n1\n",
		"members   1 live\n",
		"quorum    1 of 1 reachable, healthy\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("agent status: no %q in\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, "\nepoch     ") || !strings.Contains(stdout, "\nlease     ") {
		t.Errorf("agent status: no epoch or lease line in\n%s", stdout)
	}

	code, stdout, stderr = cli(t, "status", "-json", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent status -json: exit %d, stderr %q", code, stderr)
	}
	// The contract's field names (docs/design.md §6), not just whatever decodes.
	if got, want := jsonKeys(t, stdout), []string{"election", "epoch", "gossip_addr", "health", "id", "leader", "leader_age_ms", "lease_ms", "lease_ns", "members", "node", "protocol", "quorum", "role", "seq", "transport_addr"}; !slices.Equal(got, want) {
		t.Errorf("agent status -json keys %q, want %q", got, want)
	}
	var raw struct {
		Quorum json.RawMessage `json:"quorum"`
	}
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if got, want := jsonKeys(t, string(raw.Quorum)), []string{"healthy", "reachable", "voters"}; !slices.Equal(got, want) {
		t.Errorf("agent status -json quorum keys %q, want %q", got, want)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Node != "n1" || st.ID != 1 || st.Protocol != "majority" || st.Role != api.RoleLeader || st.Leader != "n1" ||
		st.Epoch == 0 || st.LeaseMS <= 0 || st.Members != 1 || st.Quorum != (api.Quorum{Voters: 1, Reachable: 1, Healthy: true}) {
		t.Errorf("agent status -json: %+v, want n1 leading alone with a lease", st)
	}

	code, stdout, stderr = cli(t, "status", "-consistent", "-json", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent status -consistent: exit %d, stderr %q", code, stderr)
	}
	var cst api.Status
	if err := json.Unmarshal([]byte(stdout), &cst); err != nil {
		t.Fatal(err)
	}
	if cst.Role != api.RoleLeader || cst.Epoch != st.Epoch {
		t.Errorf("agent status -consistent: %+v, want the leader in epoch %d", cst, st.Epoch)
	}

	// No -socket: $CONCLAVE_SOCKET.
	t.Setenv(api.EnvSocket, sock)
	code, stdout, stderr = cli(t, "status")
	if code != 0 || !strings.Contains(stdout, "role      leader\n") {
		t.Errorf("agent status with $%s: exit %d, stdout %q, stderr %q", api.EnvSocket, code, stdout, stderr)
	}
}

// -consistent is for majority; other protocols say so, and fail.
func TestStatusConsistentBully(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolBully)
	code, stdout, stderr := cli(t, "status", "-consistent", "-socket", tc.socket(0))
	if code != 1 || stdout != "" || !strings.Contains(stderr, "400") || !strings.Contains(stderr, "not supported") {
		t.Errorf("agent status -consistent on bully: exit %d, stdout %q, stderr %q; want exit 1 and a 400 that says why", code, stdout, stderr)
	}
	// A plain status works.
	if code, stdout, _ := cli(t, "status", "-socket", tc.socket(0)); code != 0 || !strings.Contains(stdout, "protocol  bully\n") {
		t.Errorf("agent status on bully: exit %d, %q", code, stdout)
	}
}

// TestStatusTextSaysHowOldAnObserversLeaderIs: an observer learns the
// leader by gossip, so its human status says so and how old that is; a
// voter's says nothing of the kind.
func TestStatusTextSaysHowOldAnObserversLeaderIs(t *testing.T) {
	var obs, voter strings.Builder
	printStatus(&obs, api.Status{Node: "n9", ID: 9, Role: api.RoleObserver, Leader: "n1", Epoch: 3, LeaderAgeMS: 1250})
	if !strings.Contains(obs.String(), "n1 (learned by gossip, 1250ms ago)") {
		t.Errorf("observer status:\n%s\nwant the leader's age", obs.String())
	}
	printStatus(&voter, api.Status{Node: "n2", ID: 2, Role: api.RoleFollower, Leader: "n1", Epoch: 3})
	if strings.Contains(voter.String(), "gossip,") || !strings.Contains(voter.String(), "leader    n1\n") {
		t.Errorf("voter status:\n%s\nwant the plain leader line", voter.String())
	}
}
