package api

import (
	"encoding/json"
	"testing"
)

// The field names are docs/design.md §6's contract; this test pins them.
func TestJSONFieldNames(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{Status{Node: "n1", ID: 1, Protocol: "majority", Role: RoleLeader, Leader: "n1", Epoch: 1 << 60, LeaseMS: 900, Members: 3, Quorum: Quorum{Voters: 3, Reachable: 2, Healthy: true}},
			`{"node":"n1","id":1,"protocol":"majority","role":"leader","leader":"n1","epoch":1152921504606846976,"lease_ms":900,"members":3,"quorum":{"voters":3,"reachable":2,"healthy":true},"leader_age_ms":0}`},
		{Leader{Leader: "", Epoch: 7, IsSelf: false}, `{"leader":"","epoch":7,"is_self":false}`},
		{Member{Name: "n2", ID: 2, Addr: "127.0.0.1:7950", State: StateSuspect, Phi: 3.5}, `{"name":"n2","id":2,"addr":"127.0.0.1:7950","state":"suspect","phi":3.5}`},
		{Error{Error: "boom"}, `{"error":"boom"}`},
		{Health{Status: "ok"}, `{"status":"ok"}`},
		{Heartbeat{Session: "ab-1"}, `{"session":"ab-1"}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%T:\n got %s\nwant %s", tc.v, b, tc.want)
		}
	}
}

func TestWatchLine(t *testing.T) {
	var l WatchLine
	if err := json.Unmarshal([]byte(`{"node":"n1","epoch":18446744073709551615,"role":"follower"}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Error != "" || l.Node != "n1" || l.Epoch != 1<<64-1 {
		t.Errorf("status line decoded as %+v", l)
	}
	l = WatchLine{}
	if err := json.Unmarshal([]byte(`{"error":"watcher lagged"}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Error != "watcher lagged" {
		t.Errorf("error line decoded as %+v", l)
	}
}

func TestStatusHelpers(t *testing.T) {
	s := Status{Role: RoleLeader, Leader: "n1", Epoch: 4}
	if !s.IsLeader() || s.LeaderInfo() != (Leader{Leader: "n1", Epoch: 4, IsSelf: true}) {
		t.Errorf("leader status: IsLeader=%v LeaderInfo=%+v", s.IsLeader(), s.LeaderInfo())
	}
	s.Role = RoleFollower
	if s.IsLeader() || s.LeaderInfo().IsSelf {
		t.Error("follower reported as leader")
	}
}

func TestDefaultSocketPath(t *testing.T) {
	t.Setenv(EnvSocket, "")
	if got := DefaultSocketPath(); got != DefaultSocket {
		t.Errorf("unset env: %q, want %q", got, DefaultSocket)
	}
	t.Setenv(EnvSocket, "/run/conclave.sock")
	if got := DefaultSocketPath(); got != "/run/conclave.sock" {
		t.Errorf("env set: %q", got)
	}
}

// A campaign's lines decode into CampaignLine: the first names the
// session, the middle ones are statuses, the last says why it ended.
func TestCampaignLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want CampaignLine
	}{
		{`{"election":"db","session":"ab-1","ttl_ms":5000}`, CampaignLine{Status: Status{Election: "db"}, Session: "ab-1", TTLMS: 5000}},
		{`{"election":"db","node":"n1","role":"leader","epoch":7}`, CampaignLine{Status: Status{Election: "db", Node: "n1", Role: RoleLeader, Epoch: 7}}},
		{`{"ended":"expired","error":"session expired"}`, CampaignLine{Ended: SessionExpired, Error: "session expired"}},
	} {
		var l CampaignLine
		if err := json.Unmarshal([]byte(tc.line), &l); err != nil {
			t.Fatal(err)
		}
		if l.Session != tc.want.Session || l.TTLMS != tc.want.TTLMS || l.Ended != tc.want.Ended || l.Error != tc.want.Error ||
			l.Election != tc.want.Election || l.Node != tc.want.Node || l.Epoch != tc.want.Epoch {
			t.Errorf("%s decoded as %+v, want %+v", tc.line, l, tc.want)
		}
	}
}
