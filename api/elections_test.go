package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestElectionNames(t *testing.T) {
	for _, name := range []string{"default", "a", "db-primary", "cron_1", strings.Repeat("x", MaxElectionName)} {
		if err := CheckElectionName(name); err != nil || !ValidElectionName(name) {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for name, why := range map[string]string{
		"":                                     "empty",
		strings.Repeat("x", MaxElectionName+1): "at most 32",
		"1st":                                  "start with a lower-case letter",
		"-a":                                   "start with a lower-case letter",
		"Default":                              "start with a lower-case letter",
		"dB":                                   `'B' is not allowed`,
		"a/b":                                  `'/' is not allowed`,
		"a.b":                                  `'.' is not allowed`,
		"a b":                                  `' ' is not allowed`,
		"caf\xc3\xa9":                          "is not allowed",
		"a%2f":                                 `'%' is not allowed`,
	} {
		err := CheckElectionName(name)
		if err == nil || ValidElectionName(name) {
			t.Errorf("%q accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "invalid election name") {
			t.Errorf("%q: error %q does not say %q", name, err, why)
		}
	}
}

func TestElectionPath(t *testing.T) {
	for _, p := range ElectionPaths() {
		if got := ElectionPath(DefaultElection, p); got != p {
			t.Errorf("ElectionPath(default, %s) = %s, want the unprefixed path", p, got)
		}
		if got := ElectionPath("", p); got != p {
			t.Errorf("ElectionPath(\"\", %s) = %s", p, got)
		}
		got := ElectionPath("db", p)
		if want := "/v1/elections/db/" + strings.TrimPrefix(p, "/v1/"); got != want {
			t.Errorf("ElectionPath(db, %s) = %s, want %s", p, got, want)
		}
		name, back, ok := SplitElectionPath(got)
		if !ok || name != "db" || back != p {
			t.Errorf("SplitElectionPath(%s) = %q %q %v", got, name, back, ok)
		}
	}
	for _, p := range []string{PathElections, PathElections + "/", PathElections + "/db", PathElections + "/db/", PathStatus, "/v1/electionsx/db/status"} {
		if name, rest, ok := SplitElectionPath(p); ok {
			t.Errorf("SplitElectionPath(%s) = %q %q, want not an election path", p, name, rest)
		}
	}
}

// An Election is a Status on the wire, flat: the list's items and the
// per-election status have the same fields.
func TestElectionJSON(t *testing.T) {
	e := Election{Status{Election: "db", Node: "n1", ID: 1, Protocol: "majority", Role: RoleLeader, Leader: "n1", Epoch: 3, LeaseMS: 900}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"election":"db","node":"n1","id":1,"protocol":"majority","role":"leader","leader":"n1","epoch":3,"lease_ms":900,"members":0,"quorum":{"voters":0,"reachable":0,"healthy":false},"leader_age_ms":0}`
	if string(b) != want {
		t.Errorf("Election:\n got %s\nwant %s", b, want)
	}
	var back Election
	if err := json.Unmarshal(b, &back); err != nil || back != e {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
