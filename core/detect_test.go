package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// ringWith3 is a ring node (id 1) that knows members 2 and 3 and follows
// 3, which heartbeated it ten times.
func ringWith3(t *testing.T, unsafe Unsafe) (*testNode, uint64) {
	t.Helper()
	a, _ := newTestNode(t, ProtocolRing)
	a.cfg.Unsafe = unsafe
	a.applyMember(member("b", 2, membership.StateAlive))
	a.applyMember(member("c", 3, membership.StateAlive))
	e3 := uint64(1<<20 | 3)
	for range 10 {
		a.now = a.now.Add(50 * time.Millisecond)
		a.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 3, To: 1, Leader: 3, Epoch: e3, Term: e3})
	}
	if st := a.ProtocolStatus(a.now); st.Leader != 3 {
		t.Fatalf("ring node follows %d, want 3", st.Leader)
	}
	return a, e3
}

func (tn *testNode) step(t *testing.T, m protocols.Message) {
	t.Helper()
	if err := tn.Step(tn.now, m); err != nil {
		t.Fatal(err)
	}
	tn.drain()
}

// TestRivalHeartbeatStartsNoWatch: a heartbeat from a leader this ring
// node does not follow (an older epoch's) must not leave a detector that
// would accuse that member for ever once it falls silent.
func TestRivalHeartbeatStartsNoWatch(t *testing.T) {
	for _, planted := range []bool{false, true} {
		a, _ := ringWith3(t, Unsafe{WatchRivals: planted})
		e2 := uint64(1<<20 | 2) // older than the leader's epoch
		a.step(t, protocols.Message{Kind: protocols.MsgHeartbeat, From: 2, To: 1, Leader: 2, Epoch: e2, Term: e2})
		if st := a.ProtocolStatus(a.now); st.Leader != 3 {
			t.Fatalf("ring node follows %d after the rival's heartbeat, want 3", st.Leader)
		}
		if !a.watching[3] {
			t.Error("the leader is not watched")
		}
		if watched := a.watching[2]; watched != planted {
			t.Errorf("WatchRivals=%v: rival watched = %v", planted, watched)
		}
	}
}

// TestAnyMessageClearsSuspicion: a suspected member that is not this
// node's leader never heartbeats it, so any message from it must clear the
// suspicion, or ring skips a live member for ever.
func TestAnyMessageClearsSuspicion(t *testing.T) {
	for _, planted := range []bool{false, true} {
		a, e3 := ringWith3(t, Unsafe{HeartbeatsOnlyClear: planted})
		a.now = a.now.Add(5 * time.Second)
		a.Tick(a.now)
		a.drain()
		if !a.suspected[3] {
			t.Fatal("the silent leader is not suspected")
		}
		if st := a.ProtocolStatus(a.now); st.Leader == 3 {
			t.Fatal("ring still follows the suspected leader")
		}
		a.step(t, protocols.Message{Kind: protocols.MsgRingElect, From: 3, To: 1, Candidate: 3, Epoch: e3, Hops: 1})
		if a.suspected[3] != planted {
			t.Errorf("HeartbeatsOnlyClear=%v: suspected after its election message = %v", planted, a.suspected[3])
		}
	}
}
