package agent

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/protocols"
)

// TestSnapshotNeverOutlivesTheLease checks the socket's lock-free status
// answer: a leader whose lease ran out since the loop stored the snapshot
// is reported as no leader, and a stopped loop answers nothing.
func TestSnapshotNeverOutlivesTheLease(t *testing.T) {
	a := &Agent{start: time.Now(), loopDone: make(chan struct{}), elections: []*election{{name: "default"}}}
	if _, ok := a.loadSnapshot(a.def()); ok {
		t.Fatal("an answer before the loop stored any snapshot")
	}
	leader := api.Status{Node: "n1", Role: api.RoleLeader, Leader: "n1", Epoch: 3}
	a.def().snapshot.Store(&core.Snapshot{Status: leader, LeaseUntil: a.now().Add(time.Hour)})
	st, ok := a.loadSnapshot(a.def())
	if !ok || st.Role != api.RoleLeader || st.Leader != "n1" || st.LeaseMS <= 0 || st.LeaseMS > time.Hour.Milliseconds() {
		t.Fatalf("within the lease: %+v, %v", st, ok)
	}
	a.def().snapshot.Store(&core.Snapshot{Status: leader, LeaseUntil: a.now() - protocols.Time(time.Millisecond)})
	st, ok = a.loadSnapshot(a.def())
	if !ok || st.Role != api.RoleFollower || st.Leader != "" || st.LeaseMS != 0 || st.Epoch != 3 {
		t.Fatalf("after the lease: %+v, %v; want a follower with no leader in epoch 3", st, ok)
	}
	// Bully and ring leaders hold no lease: nothing to run out.
	a.def().snapshot.Store(&core.Snapshot{Status: leader})
	if st, _ := a.loadSnapshot(a.def()); st.Role != api.RoleLeader {
		t.Fatalf("leader without a lease: %+v", st)
	}
	close(a.loopDone)
	if _, ok := a.loadSnapshot(a.def()); ok {
		t.Fatal("a stopped agent still answers from its snapshot")
	}
}

// TestOwedSnapshotLeavesTheHeartbeatFirst: a snapshot owed after a
// freshened touch falls due one heartbeat interval after snapshotEvery,
// so that while heartbeats flow the one due at snapshotEvery takes it
// and the loop spends no wake of its own; once inputs stop, the wake
// takes it.
func TestOwedSnapshotLeavesTheHeartbeatFirst(t *testing.T) {
	a := &Agent{elections: []*election{{name: "default", snapOwed: true, snapAt: protocols.Time(time.Second)}}}
	a.cfg.Detector.HeartbeatInterval = config.Duration(50 * time.Millisecond)
	e := a.def()
	heartbeatDue := e.snapAt.Add(a.snapshotEvery())
	if next, ok := a.owedSnapshots(heartbeatDue, true); !ok || next <= heartbeatDue || e.touched {
		t.Fatalf("at the heartbeat due at snapshotEvery: owed wake %v (ok %v), touched %v; want a later wake, untouched", next, ok, e.touched)
	}
	silent := heartbeatDue.Add(50 * time.Millisecond)
	if _, ok := a.owedSnapshots(silent, true); ok || !e.touched || !e.snapDue {
		t.Fatalf("a heartbeat interval later: ok %v, touched %v, due %v; want the owed snapshot taken", ok, e.touched, e.snapDue)
	}
}
