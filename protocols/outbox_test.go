package protocols

import "testing"

func TestOutboxHandsOutChangesOnce(t *testing.T) {
	var o Outbox
	hs := HardState{Term: 1}
	ss := SoftState{Role: Follower}
	o.Reset(hs, &ss)
	if o.HasReady(hs, ss) {
		t.Fatal("fresh outbox with unchanged state has work")
	}
	o.Send(Message{Kind: MsgVote, To: 2})
	hs2 := HardState{Term: 2, Vote: 1}
	rd := o.Ready(hs2, ss)
	if rd.HardState == nil || *rd.HardState != hs2 || len(rd.Messages) != 1 || rd.SoftState != nil {
		t.Fatalf("Ready = %+v", rd)
	}
	// A message queued between Ready and Advance survives the Advance.
	o.Send(Message{Kind: MsgHeartbeat, To: 3})
	o.Advance(rd)
	if got := o.Pending(); len(got) != 1 || got[0].Kind != MsgHeartbeat {
		t.Fatalf("pending after Advance: %v", got)
	}
	rd = o.Ready(hs2, ss)
	if rd.HardState != nil || len(rd.Messages) != 1 {
		t.Fatalf("second Ready = %+v", rd)
	}
	o.Advance(rd)
	if o.HasReady(hs2, ss) || o.Persisted() != hs2 {
		t.Fatalf("work left after everything was handed out")
	}
	if !o.HasReady(hs2, SoftState{Role: Leader, Leader: 1, Epoch: 2}) {
		t.Fatal("a soft state change is not work")
	}
	var fresh Outbox
	fresh.Reset(HardState{}, nil)
	if rd := fresh.Ready(HardState{}, ss); rd.SoftState == nil {
		t.Fatal("without an initial soft state the first Ready must announce one")
	}
}

func TestOutboxReadyAllocatesNothingWithoutChange(t *testing.T) {
	var o Outbox
	hs, ss := HardState{Term: 3}, SoftState{Role: Follower, Leader: 2, Epoch: 3}
	o.Reset(hs, &ss)
	allocs := testing.AllocsPerRun(100, func() {
		o.Send(Message{Kind: MsgHeartbeatResp, To: 2})
		o.Advance(o.Ready(hs, ss))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per heartbeat round trip, want 0", allocs)
	}
}
