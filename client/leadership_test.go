package client

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// A watch event that ends leadership acts at once, and a poll answer
// computed before it (lower Seq) that arrives after it cannot undo it. The
// old exec kept only updates timestamped after its last poll, and stamped
// stream events before the blocking read, so it dropped this one.
func TestLeadershipActsOnTheStreamAtOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var v Leadership
	leader := api.Status{Role: api.RoleLeader, Leader: "n1", Epoch: 5, LeaseMS: 900, LeaseNS: int64(900 * time.Millisecond), Seq: 3}
	v.Polled(leader, t0)
	if !v.Leads(t0.Add(10 * time.Millisecond)) {
		t.Fatal("a fresh poll with a lease does not vouch for leadership")
	}
	// The watch says the agent resigned; the event is read at t0+20ms.
	v.Watched(api.Status{Role: api.RoleFollower, Epoch: 5, Seq: 4})
	if v.Leads(t0.Add(20 * time.Millisecond)) {
		t.Fatal("a watch event that ends leadership was not acted on")
	}
	// A poll sent at t0+15ms, answered before the change, arrives late.
	v.Polled(leader, t0.Add(15*time.Millisecond))
	if v.Leads(t0.Add(25 * time.Millisecond)) {
		t.Fatal("a stale poll answer undid the stream's change")
	}
	// A watch event alone never starts leadership: the lease must come
	// from a poll.
	v.Watched(api.Status{Role: api.RoleLeader, Leader: "n1", Epoch: 6, LeaseNS: int64(time.Second), Seq: 6})
	if v.Leads(t0.Add(30 * time.Millisecond)) {
		t.Fatal("a watch event started leadership without a poll")
	}
	// Losing contact ends it, and the next agent process counts Seq anew.
	v.Lost(errors.New("gone"), t0.Add(40*time.Millisecond))
	if v.Err() == nil {
		t.Fatal("Err does not report the lost contact")
	}
	// A poll sent before the loss and answered after it does not restore
	// contact: the agent may have died since it answered (exec restarted
	// its command on such an answer after the agent was killed).
	v.Polled(api.Status{Role: api.RoleLeader, Leader: "n1", Epoch: 6, LeaseNS: int64(time.Second), Seq: 7}, t0.Add(35*time.Millisecond))
	if v.Leads(t0.Add(45*time.Millisecond)) || v.Err() == nil {
		t.Fatal("an answer to a request sent before contact was lost restored leadership")
	}
	v.Polled(api.Status{Role: api.RoleLeader, Leader: "n1", Epoch: 7, LeaseNS: int64(time.Second), Seq: 1}, t0.Add(time.Second))
	if !v.Leads(t0.Add(time.Second)) || v.Err() != nil || v.Status().Epoch != 7 {
		t.Fatal("after a reconnect, the new agent's low Seq was ignored")
	}
}

// A lease with less than a millisecond left is a lease, not "no lease":
// lease_ms is 0 then, lease_ns is not.
func TestLeadershipSubMillisecondLease(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var v Leadership
	lease := DefaultLeaseMargin + 400*time.Microsecond
	v.Polled(api.Status{Role: api.RoleLeader, Epoch: 2, LeaseMS: lease.Milliseconds(), LeaseNS: int64(lease), Seq: 1}, t0)
	if !v.Leads(t0.Add(100 * time.Microsecond)) {
		t.Fatal("a lease 400µs beyond the margin not honoured")
	}
	if v.Leads(t0.Add(time.Millisecond)) {
		t.Fatal("still leading 1ms later")
	}
	if d := v.Deadline(); !d.Equal(t0.Add(400 * time.Microsecond)) {
		t.Errorf("deadline %v, want the lease's end less the margin", d.Sub(t0))
	}
	// Under a millisecond: lease_ms is 0, which must not read as "no
	// lease" (leading until the poll goes stale).
	var w Leadership
	w.Polled(api.Status{Role: api.RoleLeader, Epoch: 2, LeaseMS: 0, LeaseNS: int64(400 * time.Microsecond), Seq: 1}, t0)
	if w.Leads(t0.Add(time.Millisecond)) {
		t.Fatal("a lease with 400µs left read as no lease")
	}
}

// Without a lease (bully and ring) a polled answer vouches for StaleAfter
// from when its request was sent, and no longer.
func TestLeadershipWithoutLeaseGoesStale(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v := Leadership{StaleAfter: 300 * time.Millisecond}
	v.Polled(api.Status{Role: api.RoleLeader, Epoch: 9, Seq: 1}, t0)
	if !v.Leads(t0.Add(299*time.Millisecond)) || v.Leads(t0.Add(300*time.Millisecond)) {
		t.Fatal("leadership without a lease must last exactly StaleAfter from the request")
	}
	if d := v.Deadline(); !d.Equal(t0.Add(300 * time.Millisecond)) {
		t.Errorf("deadline %v, want StaleAfter", d.Sub(t0))
	}
	// A newer epoch seen on the stream is not the one the poll vouched for.
	v.Watched(api.Status{Role: api.RoleLeader, Epoch: 10, Seq: 2})
	if v.Leads(t0.Add(time.Millisecond)) {
		t.Fatal("a new epoch from the stream was taken for the polled one")
	}
}
