package api

import (
	"encoding/json"
	"testing"
)

func TestMetaIsComparableAndAnObjectOnTheWire(t *testing.T) {
	a := NewMeta(map[string]string{"addr": "10.0.0.5:5432", "zone": "b"})
	b := NewMeta(map[string]string{"zone": "b", "addr": "10.0.0.5:5432"})
	if a != b || a.Get("addr") != "10.0.0.5:5432" {
		t.Fatalf("%v != %v", a, b)
	}
	st := Status{Node: "n1", Leader: "n1", LeaderMeta: a}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if m, ok := generic["leader_meta"].(map[string]any); !ok || m["zone"] != "b" {
		t.Fatalf("leader_meta on the wire: %s", raw)
	}
	var back Status
	if err := json.Unmarshal(raw, &back); err != nil || back != st {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	none, _ := json.Marshal(Status{Node: "n1"})
	var plain map[string]any
	if err := json.Unmarshal(none, &plain); err != nil || plain["leader_meta"] != nil {
		t.Fatalf("no meta should be absent: %s", none)
	}
	if st.LeaderInfo().LeaderMeta != a {
		t.Fatal("LeaderInfo drops leader_meta")
	}
}

func TestNoChecksIsAnEmptyListOnTheWire(t *testing.T) {
	for _, st := range []Status{
		{Node: "n1", Health: &HealthReport{Status: HealthPassing}},
		{Node: "n1", Health: &HealthReport{Status: HealthPassing, Checks: []CheckState{}}},
	} {
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var generic struct {
			Health map[string]json.RawMessage `json:"health"`
		}
		if err := json.Unmarshal(raw, &generic); err != nil {
			t.Fatal(err)
		}
		if got := string(generic.Health["checks"]); got != "[]" {
			t.Errorf("checks on the wire = %s, want []: %s", got, raw)
		}
	}
	one := HealthReport{Status: HealthFailing, Checks: []CheckState{{Name: "db", Status: CheckFailing}}}
	raw, _ := json.Marshal(one)
	var back HealthReport
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Checks) != 1 || back.Checks[0].Name != "db" {
		t.Errorf("round trip of a check: %+v, %v (%s)", back, err, raw)
	}
}
