package agent

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
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
