package transport

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// One member flooding a node whose Inbound is full used to get the other
// members' messages dropped (one shared queue, drop when full). Now each
// member's reader waits its turn: the other member's heartbeat arrives.
func TestFloodingMemberCannotCrowdOutOthers(t *testing.T) {
	small := func(c *Config) { c.InboundLen = 4 }
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey, small)
	c := newTestHost(t, 3, testKey)
	admit(t, a, b)
	admit(t, b, a)
	admit(t, c, b)
	admit(t, b, c)
	for i := range 500 {
		a.Send(2, msg(protocols.MsgVote, 1, 2, uint64(i)))
	}
	waitFor(t, "b's Inbound to fill with a's flood", func() bool { return len(b.Inbound()) == cap(b.Inbound()) })
	c.Send(2, msg(protocols.MsgHeartbeat, 3, 2, 42))
	// Give c's heartbeat the time to reach b while Inbound is full.
	time.Sleep(200 * time.Millisecond)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-b.Inbound():
			if m.From == 3 {
				if n := dropped(b, DropInboundFull); n != 0 {
					t.Errorf("b dropped %d messages for a full Inbound", n)
				}
				return
			}
		case <-deadline:
			t.Fatalf("c's heartbeat never arrived; b dropped %d for a full Inbound", dropped(b, DropInboundFull))
		}
	}
}
