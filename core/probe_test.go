package core

import (
	"testing"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// asObserver makes the test node an observer of the voters a, b and c.
func asObserver(c *Config) {
	c.Election.Voters = []string{"a", "b", "c"}
}

// joinFleet admits voters a, b, c and observers o5, o6.
func joinFleet(tn *testNode) {
	for i, name := range []string{"a", "b", "c", "o5", "o6"} {
		tn.applyMember(member(name, protocols.ID(i+2), membership.StateAlive))
	}
}

func checkProbed(t *testing.T, tn *testNode, want map[protocols.ID]bool) {
	t.Helper()
	for id, w := range want {
		if got, ok := tn.probed[id]; !ok || got != w {
			t.Errorf("member %d (%s): probed %v (admitted %v), want %v", id, tn.byID[id], got, ok, w)
		}
	}
}

// TestMajorityProbesOnlyVoters: in majority every node, voter or
// observer, probes the voters and leaves the observers alone; every bully
// or ring member probes everyone. Before, every agent of a fleet probed
// every other, and 250 agents held 62,000 connections; then voters still
// probed every observer, and a voter of 250 held 500.
func TestMajorityProbesOnlyVoters(t *testing.T) {
	obs, _ := newTestNode(t, "majority", asObserver)
	joinFleet(obs)
	checkProbed(t, obs, map[protocols.ID]bool{2: true, 3: true, 4: true, 5: false, 6: false})

	voter, _ := newTestNode(t, "majority", func(c *Config) { c.Election.Voters = []string{"self", "a", "b", "c"} })
	joinFleet(voter)
	checkProbed(t, voter, map[protocols.ID]bool{2: true, 3: true, 4: true, 5: false, 6: false})

	for _, protocol := range []string{"bully", "ring"} {
		tn, _ := newTestNode(t, protocol)
		joinFleet(tn)
		checkProbed(t, tn, map[protocols.ID]bool{2: true, 3: true, 4: true, 5: true, 6: true})
	}
}

// reconfigured is the node's protocol with its voter configuration
// replaced, as one learned from a leader would replace it.
type reconfigured struct {
	protocols.Protocol
	conf protocols.Configuration
}

func (r reconfigured) Status(now protocols.Time) protocols.Status {
	st := r.Protocol.Status(now)
	st.Config = r.conf
	return st
}

func (r reconfigured) ChangeVoters(protocols.Time, protocols.VoterChange) error { return nil }
func (r reconfigured) Problems() []string                                       { return nil }

// TestProbeScopeFollowsVoterChanges: an observer learns to probe a newly
// promoted observer and to stop probing a removed voter; promoted itself,
// it still probes only the voters.
func TestProbeScopeFollowsVoterChanges(t *testing.T) {
	tn, _ := newTestNode(t, "majority", asObserver)
	joinFleet(tn)
	reconfigure := func(voters ...string) {
		t.Helper()
		conf, err := protocols.NewConfiguration(1, 9, voters)
		if err != nil {
			t.Fatal(err)
		}
		tn.proto = reconfigured{Protocol: tn.proto, conf: conf}
		tn.Tick(tn.now)
		tn.drain()
	}
	reconfigure("a", "b", "o5")
	checkProbed(t, tn, map[protocols.ID]bool{2: true, 3: true, 4: false, 5: true, 6: false})
	reconfigure("a", "b", "self")
	checkProbed(t, tn, map[protocols.ID]bool{2: true, 3: true, 4: false, 5: false, 6: false})
}
