package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

func TestMembers(t *testing.T) {
	tc, sock := startSingle(t)
	bind := tc.cfgs[0].Gossip.Bind

	code, stdout, stderr := cli(t, "members", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent members: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("agent members: want a header and one member, got\n%s", stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "ID", "ADDRESS", "STATE", "PHI"}) {
		t.Errorf("agent members header %q", lines[0])
	}
	if got := strings.Fields(lines[1]); !slices.Equal(got, []string{"n1", "1", bind, "alive", "0.00"}) {
		t.Errorf("agent members row %q, want n1 1 %s alive 0.00", lines[1], bind)
	}

	code, stdout, stderr = cli(t, "members", "-json", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent members -json: exit %d, stderr %q", code, stderr)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("agent members -json: %v, %d members\n%s", err, len(raw), stdout)
	}
	if got, want := jsonKeys(t, string(raw[0])), []string{"addr", "id", "name", "phi", "state"}; !slices.Equal(got, want) {
		t.Errorf("agent members -json keys %q, want %q", got, want)
	}
	var ms []api.Member
	if err := json.Unmarshal([]byte(stdout), &ms); err != nil {
		t.Fatal(err)
	}
	if want := (api.Member{Name: "n1", ID: 1, Addr: bind, State: api.StateAlive}); ms[0] != want {
		t.Errorf("agent members -json: %+v, want %+v", ms[0], want)
	}
}

// TestMembersVerbose: on a real two-agent cluster, the leader reports the
// gaps between its follower's heartbeat answers, and -v prints them.
func TestMembersVerbose(t *testing.T) {
	tc := newTestCluster(t, 2, "majority")
	leader, _ := tc.waitLeader(0)
	follower := tc.follower(leader)
	var m api.Member
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		code, stdout, _ := cli(t, "members", "-json", "-socket", tc.socket(leader))
		var ms []api.Member
		if code == 0 && json.Unmarshal([]byte(stdout), &ms) == nil {
			for _, x := range ms {
				if x.Name == tc.cfgs[follower].Node.Name && x.Heartbeats != nil && x.Heartbeats.Samples >= 5 {
					m = x
				}
			}
		}
		if m.Heartbeats != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	h := m.Heartbeats
	if h == nil {
		t.Fatal("the leader reports no heartbeat gaps for its follower within 10s")
	}
	if h.P50Ms <= 0 || h.P50Ms > h.P99Ms || h.P99Ms > h.P999Ms || h.P999Ms > h.MaxGapMs {
		t.Errorf("heartbeat stats out of order: %+v", *h)
	}
	code, stdout, stderr := cli(t, "members", "-v", "-socket", tc.socket(leader))
	if code != 0 || stderr != "" {
		t.Fatalf("agent members -v: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "ID", "ADDRESS", "STATE", "PHI", "GAP", "P50", "P99", "P99.9", "MAX", "SAMPLES"}) {
		t.Errorf("agent members -v header %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 10 {
			t.Errorf("agent members -v row %q: want 10 columns", l)
		}
		if f[0] == tc.cfgs[follower].Node.Name && f[9] == "0" {
			t.Errorf("agent members -v shows no samples for the follower: %q", l)
		}
	}
}
