package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/protocols"
)

// TestConfigFromStartCandidacy: the start candidacy rule. An agent in
// maintenance, or with checks that have not run yet, starts ineligible;
// one with neither starts eligible; the priority is the configuration's.
func TestConfigFromStartCandidacy(t *testing.T) {
	check := config.Check{Name: "db", Command: []string{"true"}}
	for _, tc := range []struct {
		name        string
		checks      []config.Check
		maintenance bool
		ineligible  bool
	}{
		{"no checks, no maintenance", nil, false, false},
		{"checks not run yet", []config.Check{check}, false, true},
		{"maintenance", nil, true, true},
		{"both", []config.Check{check}, true, true},
	} {
		cfg := config.Default()
		cfg.Node.Priority = 7
		cfg.Checks = tc.checks
		got := ConfigFrom(cfg, Start{Maintenance: tc.maintenance}).Election.Candidacy
		want := protocols.Candidacy{Ineligible: tc.ineligible, Priority: 7}
		if got != want {
			t.Errorf("%s: start candidacy %+v, want %+v", tc.name, got, want)
		}
	}
}

// TestConfigFromSelfAndTimings: the core learns who it is, the voters it
// starts with, and its timings from the configuration alone.
func TestConfigFromSelfAndTimings(t *testing.T) {
	cfg := config.Default()
	cfg.Node.ID, cfg.Node.Name = 9, "n9"
	cfg.Election.Protocol = ProtocolMajority
	cfg.Election.Voters = []string{"n1", "n9"}
	cfg.Election.ElectionTimeout = config.Duration(300 * time.Millisecond)
	c := ConfigFrom(cfg, Start{})
	if s := c.Election.Self; s.ID != 9 || s.Name != "n9" {
		t.Errorf("self %+v, want id 9, name n9", s)
	}
	if v := c.Election.Voters; len(v) != 2 || v[1] != "n9" {
		t.Errorf("voters %v, want the configuration's", v)
	}
	if c.ConfirmTimeout != 300*time.Millisecond || c.Election.ElectionTimeout != 300*time.Millisecond {
		t.Errorf("confirm timeout %v, election timeout %v; want both 300ms", c.ConfirmTimeout, c.Election.ElectionTimeout)
	}
	if c.Election.MaxClockDrift != DefaultMaxClockDrift {
		t.Errorf("max clock drift %v, want %v", c.Election.MaxClockDrift, DefaultMaxClockDrift)
	}
	cfg.Election.Voters[0] = "changed"
	if c.Election.Voters[0] != "n1" {
		t.Error("the core's voters share the configuration's slice")
	}
}

// TestEligibilityRule: a node is eligible only out of maintenance with
// every check passing, and keeps its configured priority whatever the
// facts say.
func TestEligibilityRule(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self"}, Candidacy: protocols.Candidacy{Priority: 4}}, false, Unsafe{})
	for _, tc := range []struct {
		h    Health
		want bool
	}{
		{Health{}, true},
		{Health{ChecksFailing: true}, false},
		{Health{Maintenance: true}, false},
		{Health{Maintenance: true, ChecksFailing: true}, false},
		{Health{}, true},
	} {
		tn.SetHealth(tn.now, tc.h)
		tn.drain()
		if c := tn.Candidacy(); c.Eligible() != tc.want || c.Priority != 4 {
			t.Errorf("health %+v: candidacy %+v, want eligible=%v priority 4", tc.h, c, tc.want)
		}
	}
}

// A group's anchor is its first election; the others follow it, and an
// election of no group follows nothing.
func TestConfigForGroups(t *testing.T) {
	c := config.Default()
	c.Node = config.Node{Name: "n1", ID: 1, DataDir: "d"}
	c.Election.Voters = []string{"n1"}
	vip := "vip"
	c.Elections = map[string]config.NamedElection{"b": {Group: &vip}, "a": {Group: &vip}, "solo": {}}
	for name, want := range map[string]bool{"default": false, "a": false, "b": true, "solo": false} {
		cc, ok := ConfigFor(c, name, Start{})
		if !ok || cc.FollowsGroup != want || cc.Election.Candidacy.Ineligible != want {
			t.Errorf("%s: FollowsGroup %v, ineligible at start %v; want %v", name, cc.FollowsGroup, cc.Election.Candidacy.Ineligible, want)
		}
	}
}
