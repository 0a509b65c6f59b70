package core

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// policyNode builds a node with its own settings for the policy tests.
func policyNode(t *testing.T, spec ProtocolSpec, gossip bool, unsafe Unsafe) *testNode {
	t.Helper()
	tn := newTestShell()
	obs, logs := observer.New(zapcore.InfoLevel)
	tn.logs = logs
	spec.Self = protocols.Member{ID: 1, Name: "self"}
	spec.ElectionTimeout, spec.HeartbeatInterval = time.Second, 50*time.Millisecond
	spec.PreVote, spec.CheckQuorum, spec.Preempt, spec.MaxClockDrift = true, true, true, 0.01
	spec.Now, spec.Rand = tn.now, NewRand(3, 4)
	n, err := New(Config{Election: spec, Detector: phi.DefaultConfig(), Gossip: gossip, Unsafe: unsafe,
		Reachable: func(id protocols.ID) bool { return tn.reachable[id] }, Logger: zap.New(obs).Sugar()})
	if err != nil {
		t.Fatal(err)
	}
	tn.Node = n
	tn.drain()
	return tn
}

func (tn *testNode) at(d time.Duration) {
	tn.now = tn.now.Add(d)
	tn.Tick(tn.now)
	tn.drain()
}

// bullyEpoch is the n-th epoch bully leader id creates.
func bullyEpoch(n uint64, id protocols.ID) uint64 { return n<<protocols.EpochIDBits | uint64(id) }

// TestNewLeaderIsWatchedBeforeItsFirstHeartbeat: a bully follower that
// learns its leader from a COORDINATOR message watches it at once, so a
// leader that dies before its first heartbeat is suspected within the
// detector's bound. Without it (Unsafe.NoWatchLeader) nothing watched the
// leader and failover waited seconds for gossip to declare it dead.
func TestNewLeaderIsWatchedBeforeItsFirstHeartbeat(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully}, false, Unsafe{NoWatchLeader: unsafe})
		tn.applyMember(member("a", 5, membership.StateAlive))
		tn.step(t, protocols.Message{Kind: protocols.MsgCoordinator, From: 5, To: 1, Leader: 5, Epoch: bullyEpoch(1, 5)})
		if st, name := tn.Leader(tn.now); st.Leader != 5 || name != "a" {
			t.Fatalf("unsafe=%v: leader %d (%q) after the COORDINATOR, want 5 (a)", unsafe, st.Leader, name)
		}
		_, watched := tn.Phi(tn.now, 5)
		for range 100 { // 5 s of silence: the leader died
			tn.at(50 * time.Millisecond)
		}
		suspected := tn.logs.FilterMessage("member suspected").FilterField(zap.String("member", "a")).Len() > 0
		if watched == unsafe || suspected == unsafe {
			t.Errorf("unsafe=%v: leader watched=%v, suspected within 5 s of silence=%v", unsafe, watched, suspected)
		}
	}
}

// TestLeaderChangeForgetsSilentMembers: after leadership moves from a to b,
// a bully follower forgets a's detector — a stops heartbeating without
// having failed, and must not stay suspected (ring skipped such a member
// for ever) — and watches b.
func TestLeaderChangeForgetsSilentMembers(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully}, false, Unsafe{KeepDetectors: unsafe})
		tn.applyMember(member("a", 5, membership.StateAlive))
		tn.applyMember(member("b", 7, membership.StateAlive))
		tn.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 5, To: 1, Leader: 5, Epoch: bullyEpoch(1, 5)})
		tn.step(t, protocols.Message{Kind: protocols.MsgCoordinator, From: 7, To: 1, Leader: 7, Epoch: bullyEpoch(2, 7)})
		for range 100 {
			tn.at(50 * time.Millisecond)
			tn.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 7, To: 1, Leader: 7, Epoch: bullyEpoch(2, 7)})
		}
		if _, kept := tn.Phi(tn.now, 5); kept != unsafe || tn.suspected[5] != unsafe {
			t.Errorf("unsafe=%v: former leader's detector kept=%v, suspected=%v", unsafe, kept, tn.suspected[5])
		}
		if tn.suspected[7] {
			t.Errorf("unsafe=%v: the heartbeating leader is suspected", unsafe)
		}
	}
}

// TestObserversGetAnnouncementsNotHeartbeats: a majority leader with an
// observer among its members heartbeats only voters and announces itself
// by gossip; without gossip every member is heartbeated.
func TestObserversGetAnnouncementsNotHeartbeats(t *testing.T) {
	for _, gossip := range []bool{true, false} {
		tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self"}}, gossip, Unsafe{})
		tn.at(10 * time.Millisecond)
		if st, _ := tn.Leader(tn.now); st.Role != protocols.Leader {
			t.Fatalf("gossip=%v: a lone voter is %v, want leader", gossip, st.Role)
		}
		obs := member("c", 9, membership.StateAlive)
		tn.ApplyMember(tn.now, obs)
		heartbeats, announcements := 0, 0
		for range 100 { // 5 s: announcements every observe.RefreshInterval
			tn.now = tn.now.Add(50 * time.Millisecond)
			tn.Tick(tn.now)
			for tn.HasReady() {
				rd := tn.Ready()
				for _, m := range rd.Messages {
					if m.To == 9 && m.Kind == protocols.MsgHeartbeat {
						heartbeats++
					}
				}
				announcements += len(rd.Announcements)
				tn.Advance(rd)
			}
		}
		if gossip && (heartbeats != 0 || announcements < 2) {
			t.Errorf("gossip: %d heartbeats to the observer, %d announcements in 5 s; want 0 and ≥ 2", heartbeats, announcements)
		}
		if !gossip && (heartbeats < 50 || announcements != 0) {
			t.Errorf("no gossip: %d heartbeats to the observer, %d announcements; want ≥ 50 and 0", heartbeats, announcements)
		}
	}
}

// TestUnknownSenderIsRefused: a message from an id gossip never introduced
// reaches neither the detectors nor the protocol.
func TestUnknownSenderIsRefused(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolBully}, false, Unsafe{})
	err := tn.Step(tn.now, protocols.Message{Kind: protocols.MsgHeartbeat, From: 5, To: 1, Leader: 5, Epoch: bullyEpoch(1, 5)})
	if err == nil {
		t.Fatal("a message from an unknown id was accepted")
	}
	if _, watched := tn.Phi(tn.now, 5); watched || tn.Stats().StepErrors != 1 {
		t.Fatalf("unknown sender: watched=%v, step errors %d", watched, tn.Stats().StepErrors)
	}
	if st, _ := tn.Leader(tn.now); st.Leader == 5 {
		t.Fatal("an unknown sender became leader")
	}
}

// TestHealthReportIsPublished: a new health report reaches watchers even
// when the candidacy, and so who leads, does not change (maintenance on
// while a check already fails).
func TestHealthReportIsPublished(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self"}}, false, Unsafe{})
	tn.SetHealth(tn.now, Health{ChecksFailing: true, Report: &api.HealthReport{Status: api.HealthFailing}})
	tn.drain()
	tn.SetHealth(tn.now, Health{ChecksFailing: true, Maintenance: true, Report: &api.HealthReport{Status: api.HealthMaintenance}})
	var published *api.Status
	for tn.HasReady() {
		rd := tn.Ready()
		if rd.Status != nil {
			published = rd.Status
		}
		tn.Advance(rd)
	}
	if published == nil || published.Health == nil || published.Health.Status != api.HealthMaintenance {
		t.Fatalf("maintenance with an unchanged candidacy published %+v; want a status whose health is maintenance", published)
	}
}
