package api

import (
	"encoding/json"
	"testing"
)

// Pins the voters' field names and the wire form of problems, like
// TestJSONFieldNames.
func TestVotersJSON(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{Voters{Index: 3, Term: 2, Voters: []string{"n1", "n2", "n3"}, Leader: "n1"},
			`{"index":3,"term":2,"voters":["n1","n2","n3"],"pending":null,"leader":"n1"}`},
		{Voters{Index: 3, Term: 2, Voters: []string{"n1"}, Pending: &PendingVoters{Index: 4, Term: 2, Voters: []string{"n1", "n2"}}},
			`{"index":3,"term":2,"voters":["n1"],"pending":{"index":4,"term":2,"voters":["n1","n2"]}}`},
		{VoterChange{Add: "n4"}, `{"add":"n4"}`},
		{VoterChange{Remove: "n2"}, `{"remove":"n2"}`},
		{Status{Node: "n1", Problems: NewProblems([]string{"a", "b"})},
			`{"node":"n1","id":0,"protocol":"","role":"","leader":"","epoch":0,"lease_ms":0,"members":0,"quorum":{"voters":0,"reachable":0,"healthy":false},"leader_age_ms":0,"problems":["a","b"]}`},
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
	var st Status
	if err := json.Unmarshal([]byte(`{"node":"n1","problems":["x\ny","z"]}`), &st); err != nil {
		t.Fatal(err)
	}
	if l := st.Problems.List(); len(l) != 2 || l[0] != "x y" || l[1] != "z" {
		t.Errorf("problems decoded as %q", l)
	}
	if err := json.Unmarshal([]byte(`{"problems":"not a list"}`), &st); err == nil {
		t.Error("a problems string decoded")
	}
}
