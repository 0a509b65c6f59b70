package config

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNamedElectionsInherit(t *testing.T) {
	c := Default()
	err := c.Decode("t.toml", strings.NewReader(`
[node]
name = "n1"
id = 1
data_dir = "d"
[election]
voters = ["n1", "n2", "n3"]
election_timeout = "300ms"
[elections.scheduler]
protocol = "bully"
[elections.reports]
voters = ["n2"]
prevote = false
`))
	if err != nil {
		t.Fatal(err)
	}
	c.derive()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := c.ElectionNames(); !slices.Equal(got, []string{"default", "reports", "scheduler"}) {
		t.Errorf("ElectionNames = %v", got)
	}
	s, ok := c.ElectionFor("scheduler")
	if !ok || s.Protocol != ProtocolBully || s.ElectionTimeout.Std() != 300*time.Millisecond || !slices.Equal(s.Voters, c.Election.Voters) {
		t.Errorf("scheduler = %+v, want bully inheriting the timeout and voters", s)
	}
	r, _ := c.ElectionFor("reports")
	if r.Protocol != ProtocolMajority || r.PreVote || !r.CheckQuorum || !slices.Equal(r.Voters, []string{"n2"}) {
		t.Errorf("reports = %+v, want majority with its own voters and prevote off", r)
	}
	d, _ := c.ElectionFor(DefaultElection)
	if d.Protocol != ProtocolMajority || !d.PreVote {
		t.Errorf("default = %+v, want [election] unchanged", d)
	}
	if _, ok := c.ElectionFor("nope"); ok {
		t.Error("ElectionFor(nope) ok, want false")
	}
}

func TestNamedElectionsRefused(t *testing.T) {
	for _, tc := range []struct{ toml, key string }{
		{"[elections.Bad]\nprotocol = \"bully\"", "elections.Bad"},
		{"[elections.default]\nprotocol = \"bully\"", "elections.default"},
		{"[elections.x]\nprotocol = \"raft\"", "elections.x.protocol"},
		{"[elections.x]\nvoters = []", "elections.x.voters"},
		{"[elections.x]\nelection_timeout = \"10ms\"", "elections.x.election_timeout"},
		{"[elections.x]\npriority = 256", "elections.x.priority"},
	} {
		c := Default()
		c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
		c.Election.Voters = []string{"n1"}
		if err := c.Decode("t.toml", strings.NewReader(tc.toml)); err != nil {
			t.Fatalf("%q: %v", tc.toml, err)
		}
		c.derive()
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: Validate = %v, want a problem with %s", tc.toml, err, tc.key)
		}
	}
	c := Default()
	c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
	c.Election.Voters = []string{"n1"}
	c.Elections = map[string]NamedElection{}
	for i := range MaxElections {
		c.Elections[strings.Repeat("e", 1+i%20)+string(rune('a'+i/20))] = NamedElection{}
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d elections: Validate = %v, want refused", len(c.Elections)+1, err)
	}
}

func TestElectionsFlag(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	f := RegisterFlags(fs)
	if err := fs.Parse([]string{"-elections=jobs.protocol=ring", "-elections", "jobs.voters=a, b", "-elections=jobs.prevote=false", "-elections=jobs.election_timeout=1s", "-elections=jobs.priority=7", "-node.priority=2"}); err != nil {
		t.Fatal(err)
	}
	c := Default()
	f.Apply(&c)
	e, ok := c.ElectionFor("jobs")
	if !ok || e.Protocol != ProtocolRing || !slices.Equal(e.Voters, []string{"a", "b"}) || e.PreVote || e.ElectionTimeout.Std() != time.Second {
		t.Errorf("jobs = %+v (ok %v), want ring, voters a,b, prevote off, 1s", e, ok)
	}
	if p, d := c.PriorityFor("jobs"), c.PriorityFor(DefaultElection); p != 7 || d != 2 {
		t.Errorf("priorities: jobs %d, default %d; want 7 and node.priority 2", p, d)
	}
	if got := c.ElectionPriorities(); len(got) != 1 || got["jobs"] != 7 {
		t.Errorf("published priorities %v, want jobs=7 only", got)
	}
	for _, bad := range []string{"-elections=jobs", "-elections=Jobs.protocol=ring", "-elections=jobs.nope=1", "-elections=jobs.prevote=maybe", "-elections=jobs.election_timeout=100"} {
		if err := fs.Parse([]string{bad}); err == nil {
			t.Errorf("Parse(%s) = nil, want an error", bad)
		}
	}
}
