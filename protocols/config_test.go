package protocols

import (
	"strings"
	"testing"
)

func TestConfigurationSortsAndChecks(t *testing.T) {
	c, err := NewConfiguration(3, 2, []string{"n3", "n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Voters != "n1,n2,n3" || c.Len() != 3 || !c.Has("n2") || c.Has("n") || c.Has("") {
		t.Fatalf("configuration %v", c)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	for name, voters := range map[string][]string{
		"none":      nil,
		"duplicate": {"a", "a"},
		"empty":     {""},
		"comma":     {"a,b"},
		"too long":  {strings.Repeat("x", MaxNameLen+1)},
		"too many":  make([]string, MaxVoters+1),
	} {
		if _, err := NewConfiguration(1, 1, voters); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (Configuration{Index: 1, Voters: "b,a"}).Check(); err == nil {
		t.Error("unsorted list accepted")
	}
}

func TestConfigurationOrder(t *testing.T) {
	a := Configuration{Term: 2, Index: 5}
	for _, c := range []struct {
		b    Configuration
		want int
	}{
		{Configuration{Term: 2, Index: 5}, 0},
		{Configuration{Term: 3, Index: 1}, -1}, // the term ranks first, as in Raft's log check
		{Configuration{Term: 1, Index: 9}, 1},
		{Configuration{Term: 2, Index: 6}, -1},
	} {
		if got := a.Compare(c.b); got != c.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", a, c.b, got, c.want)
		}
	}
}

func TestCheckHardStateConfiguration(t *testing.T) {
	for name, hs := range map[string]HardState{
		"config ahead of term":       {Term: 1, Config: Configuration{Term: 2, Index: 1, Voters: "a"}},
		"bootstrap marked committed": {Term: 1, Config: Configuration{Voters: "a"}, ConfigCommitted: true},
		"unsorted":                   {Term: 1, Config: Configuration{Index: 1, Voters: "b,a"}},
	} {
		if err := CheckHardState(hs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestConfigurationQuorum(t *testing.T) {
	c, err := NewConfiguration(1, 2, []string{"n1", "n2", "n3", "n4", "n5"})
	if err != nil {
		t.Fatal(err)
	}
	up := map[string]bool{"n1": true, "n3": true}
	reach := func(v string) bool { return up[v] }
	if v, r, ok := c.Quorum(reach); v != 5 || r != 2 || ok {
		t.Errorf("2 of 5: got %d of %d healthy=%v", r, v, ok)
	}
	up["n5"] = true
	if v, r, ok := c.Quorum(reach); v != 5 || r != 3 || !ok {
		t.Errorf("3 of 5: got %d of %d healthy=%v", r, v, ok)
	}
	// A member outside the configuration never counts.
	up["n9"] = true
	if _, r, _ := c.Quorum(reach); r != 3 {
		t.Errorf("n9 is no voter, yet counted: %d reachable", r)
	}
	if v, r, ok := (Configuration{}).Quorum(func(string) bool { return true }); v != 0 || r != 0 || ok {
		t.Errorf("empty configuration: got %d of %d healthy=%v", r, v, ok)
	}
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3} {
		if got := QuorumSize(n); got != want {
			t.Errorf("QuorumSize(%d) = %d, want %d", n, got, want)
		}
	}
}
