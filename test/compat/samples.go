// Package compat keeps golden copies of a release's wire frames, state
// records and socket JSON, and checks the tree against them: the tree must
// read what the release wrote and write what the release reads, unless the
// surface's version was bumped (docs/compatibility.md, "Golden copies").
//
// The samples below are built with the release's API only, so the same
// file compiles in the release's source (scripts/compat-golden runs the
// generator there) and in the tree (the test compares).
package compat

import (
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/transport"
)

// Messages returns one election message of every kind the release knows,
// each with the fields that kind carries set to distinct values, so a
// field that moves, renames or changes its encoding shows in the bytes.
func Messages() []protocols.Message {
	cfg := func(m protocols.Message) protocols.Message {
		m.ConfigTerm, m.ConfigIndex, m.Voters = 4, 9, "n1,n2,n3"
		return m
	}
	return []protocols.Message{
		cfg(protocols.Message{Kind: protocols.MsgPreVote, From: 1, To: 2, Term: 7, Priority: 3}),
		cfg(protocols.Message{Kind: protocols.MsgPreVoteResp, From: 2, To: 1, Term: 7, Reject: true, Leader: 3}),
		cfg(protocols.Message{Kind: protocols.MsgVote, From: 1, To: 3, Term: 8, Ineligible: true}),
		cfg(protocols.Message{Kind: protocols.MsgVoteResp, From: 3, To: 1, Term: 8}),
		cfg(protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 8, Epoch: 8, Context: 1234567, Commit: 9}),
		cfg(protocols.Message{Kind: protocols.MsgHeartbeatResp, From: 2, To: 1, Term: 8, Context: 1234567, Priority: 255}),
		{Kind: protocols.MsgTimeoutNow, From: 1, To: 2, Term: 8},
		{Kind: protocols.MsgElection, From: 2, To: 5, Epoch: 5242881},
		{Kind: protocols.MsgOK, From: 5, To: 2, Epoch: 5242881},
		{Kind: protocols.MsgCoordinator, From: 5, To: 1, Leader: 5, Epoch: 5242885},
		{Kind: protocols.MsgRingElect, From: 3, To: 4, Candidate: 3, Epoch: 3145731},
		{Kind: protocols.MsgRingLeader, From: 4, To: 5, Leader: 4, Epoch: 4194308},
		{Kind: protocols.MsgHSProbe, From: 2, To: 1, Candidate: 2, Phase: 3, Hops: 5, Direction: protocols.CounterClockwise},
		{Kind: protocols.MsgHSReply, From: 1, To: 2, Candidate: 2, Phase: 3, Direction: protocols.Clockwise},
	}
}

// VoterRequests returns forwarded voter changes (/conclave/voters/1).
func VoterRequests() []transport.VoterRequest {
	return []transport.VoterRequest{{Add: "n4"}, {Remove: "n2"}, {}}
}

// VoterReplies returns a leader's answers to forwarded voter changes.
func VoterReplies() []transport.VoterReply {
	return []transport.VoterReply{
		{Code: transport.ForwardOK, Term: 3, Index: 7, Voters: "n1,n3,n4", Leader: "n1", PendingTerm: 3, PendingIndex: 8, PendingVoters: "n1,n3"},
		{Code: transport.ForwardBadRequest, Error: "name exactly one member", Leader: "n1"},
	}
}

// HardStates returns election state records as the agent persists them.
func HardStates() []protocols.HardState {
	return []protocols.HardState{
		{Term: 12, Vote: 3, Epoch: 12, Config: protocols.Configuration{Term: 4, Index: 9, Voters: "n1,n2,n3"}, ConfigCommitted: true},
		{Term: 0, Vote: protocols.None, Epoch: 5242885},
	}
}

// ObservedEpochs returns values of the gossip epoch floor (the observed
// file).
func ObservedEpochs() []uint64 { return []uint64{1, 5242885} }

// at is a fixed instant, so the JSON samples are the same every run.
var at = time.Date(2026, 11, 30, 22, 2, 6, 0, time.UTC)

// Socket returns one value of every JSON body the socket API answers, by a
// name that says which endpoint answers it.
func Socket() map[string]any {
	leading := api.Status{
		Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleLeader, Leader: "n1", Epoch: 12,
		LeaseMS: 450, LeaseNS: 450000000, Seq: 3, Members: 3,
		Quorum:     api.Quorum{Voters: 3, Reachable: 3, Healthy: true},
		GossipAddr: "127.0.0.1:7946", TransportAddr: "/ip4/127.0.0.1/tcp/7947/p2p/12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo",
		LeaderMeta: api.NewMeta(map[string]string{"addr": "10.0.0.5:5432"}),
		Health: &api.HealthReport{
			Status:      api.HealthMaintenance,
			Maintenance: &api.MaintInfo{Reason: "kernel upgrade", Since: at},
			Checks:      []api.CheckState{{Name: "db", Status: api.CheckPassing, Output: "ok", LastRun: at}},
			Priority:    2,
		},
		Problems: api.NewProblems([]string{"n3 holds voters n1,n2 at index 9; ours are n1,n2,n3"}),
	}
	observing := api.Status{
		Node: "n4", ID: 4, Protocol: "bully", Role: api.RoleObserver, Leader: "n5", Epoch: 5242885,
		Members: 5, Quorum: api.Quorum{Voters: 5, Reachable: 4}, LeaderAgeMS: 120,
		Health: &api.HealthReport{Status: api.HealthFailing, Checks: []api.CheckState{{Name: "disk", Status: api.CheckFailing, Output: "97% full", LastRun: at}}, NoHealthyCandidate: true},
	}
	return map[string]any{
		"status-leader":   leading,
		"status-observer": observing,
		"leader":          leading.LeaderInfo(),
		"members": []api.Member{
			{Name: "n1", ID: 1, Addr: "127.0.0.1:7946", State: "alive", Phi: 0.25},
			{Name: "n2", ID: 2, Addr: "127.0.0.1:7956", State: "suspect", Phi: 9.5},
		},
		"health":      api.Health{Status: "ok"},
		"resigned":    api.Resigned{Resigned: true},
		"voters":      api.Voters{Index: 9, Term: 4, Voters: []string{"n1", "n2", "n3"}, Pending: &api.PendingVoters{Index: 10, Term: 4, Voters: []string{"n1", "n2", "n3", "n4"}}, Leader: "n1"},
		"voterchange": api.VoterChange{Add: "n4"},
		"maint":       api.MaintResult{Maintenance: true, Info: &api.MaintInfo{Reason: "kernel upgrade", Since: at}},
		"error":       api.Error{Error: "this agent does not lead"},
	}
}
