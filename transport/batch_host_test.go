package transport

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/conclave-agent/conclave/protocols"
)

// onlyV1 makes a test host speak /conclave/election/1 alone, as a release
// up to v0.1.0 does.
func onlyV1(c *Config) { c.onlyV1 = true }

// named returns a heartbeat of election el.
func named(el string, from, to protocols.ID, ctx uint64) protocols.Message {
	m := msg(protocols.MsgHeartbeat, from, to, ctx)
	m.Election = el
	return m
}

// outboundProtocol returns the protocol of a's outbound election stream to
// b ("" without one).
func outboundProtocol(a, b *testHost) protocol.ID {
	pid, _ := peer.Decode(b.PeerID())
	for _, c := range a.h.Network().ConnsToPeer(pid) {
		for _, s := range c.GetStreams() {
			if p := s.Protocol(); (p == ProtocolID || p == BatchProtocolID) && s.Stat().Direction == network.DirOutbound {
				return p
			}
		}
	}
	return ""
}

var testElections = []string{"", "db", "queue-7", "cron_a"}

// TestCoalescedFramesCarrySeveralElections: one SendAll to two peers
// reaches each in one write of one frame, with every election's name and
// each peer's order kept, and the answers come back the same way.
func TestCoalescedFramesCarrySeveralElections(t *testing.T) {
	a, b, c := newTestHost(t, 1, testKey), newTestHost(t, 2, testKey), newTestHost(t, 3, testKey)
	for _, x := range []*testHost{a, b, c} {
		for _, y := range []*testHost{a, b, c} {
			if x != y {
				admit(t, x, y)
			}
		}
	}
	const rounds = 3
	var all []protocols.Message
	for r := range rounds {
		all = all[:0]
		for i, el := range testElections {
			for _, to := range []protocols.ID{2, 3} {
				all = append(all, named(el, 1, to, uint64(10*r+i)))
			}
		}
		a.SendAll(all)
		for _, y := range []*testHost{b, c} {
			for i, el := range testElections {
				m := recv(t, y)
				if m.Election != el || m.Context != uint64(10*r+i) || m.From != 1 || m.To != y.cfg.Self {
					t.Fatalf("round %d: node %d got %v, want election %q context %d", r, y.cfg.Self, m, el, 10*r+i)
				}
			}
		}
	}
	sent := uint64(rounds * len(testElections) * 2)
	// The sender counts a write once it returns, which may be after the
	// peer has read it.
	waitFor(t, "a's sent counters", func() bool { return a.Stats().Sent["Heartbeat"] == sent })
	st := a.Stats()
	if st.Sent["Heartbeat"] != sent || len(st.Dropped) != 0 {
		t.Fatalf("a's stats %+v, want %d heartbeats sent and no drops", st, sent)
	}
	// One SendAll, one unit per peer, one write of one frame each: the
	// sender waited for each round's delivery, so nothing else shared a
	// write.
	if st.FramesSent != 2*rounds || st.Writes != 2*rounds {
		t.Fatalf("a wrote %d frames in %d writes for %d messages, want %d of each", st.FramesSent, st.Writes, sent, 2*rounds)
	}
	for _, y := range []*testHost{b, c} {
		if p := outboundProtocol(a, y); p != BatchProtocolID {
			t.Fatalf("a's stream to %d speaks %q, want %s", y.cfg.Self, p, BatchProtocolID)
		}
		waitFor(t, "the frame counter", func() bool { return y.Stats().FramesReceived == rounds })
	}

	// And back, every election's answer in one frame.
	var back []protocols.Message
	for i, el := range testElections {
		back = append(back, named(el, 2, 1, uint64(100+i)))
	}
	b.SendAll(back)
	for i, el := range testElections {
		if m := recv(t, a); m.Election != el || m.Context != uint64(100+i) {
			t.Fatalf("a got %v, want election %q context %d", m, el, 100+i)
		}
	}
	waitFor(t, "b's sent counters", func() bool { return b.Stats().Writes == 1 })
	if st := b.Stats(); st.FramesSent != 1 || st.BytesSent == 0 {
		t.Fatalf("b's stats %+v, want one frame", st)
	}
}

// TestV1PeerGetsOnlyTheDefaultElection: a peer that speaks only
// /conclave/election/1 gets the default election's messages in v1 frames
// and never a named election's: those are dropped and counted. It still
// sends to a v2 host, which reads v1.
func TestV1PeerGetsOnlyTheDefaultElection(t *testing.T) {
	a := newTestHost(t, 1, testKey)
	old := newTestHost(t, 2, testKey, onlyV1)
	admit(t, a, old)
	admit(t, old, a)
	a.SendAll([]protocols.Message{named("", 1, 2, 1), named("db", 1, 2, 2), named("", 1, 2, 3), named("queue-7", 1, 2, 4)})
	a.Send(2, named("db", 1, 2, 5))
	a.Send(2, named("", 1, 2, 6))
	for _, want := range []uint64{1, 3, 6} {
		if m := recv(t, old); m.Context != want || m.Election != "" {
			t.Fatalf("old peer got %v, want the default election's context %d", m, want)
		}
	}
	expectNothing(t, old)
	waitFor(t, "a's sent counters", func() bool { return a.Stats().Sent["Heartbeat"] == 3 })
	st := a.Stats()
	if st.Dropped[DropUnsupported] != 3 || len(st.Dropped) != 1 {
		t.Fatalf("a dropped %v, want 3 %s and nothing else", st.Dropped, DropUnsupported)
	}
	if st.FramesSent != 3 || st.Sent["Heartbeat"] != 3 {
		t.Fatalf("a's stats %+v: want 3 v1 frames of one message each", st)
	}
	if p := outboundProtocol(a, old); p != ProtocolID {
		t.Fatalf("a's stream to the old peer speaks %q, want %s", p, ProtocolID)
	}
	if len(old.Stats().Dropped) != 0 {
		t.Fatalf("the old peer refused something: %v", old.Stats().Dropped)
	}
	if !hasLog(a.logs, "speaks only") {
		t.Fatal("a logged nothing about the dropped messages")
	}

	old.SendAll([]protocols.Message{named("", 2, 1, 7), named("", 2, 1, 8)})
	for _, want := range []uint64{7, 8} {
		if m := recv(t, a); m.Context != want {
			t.Fatalf("a got %v from the old peer, want context %d", m, want)
		}
	}
	if p := outboundProtocol(old, a); p != ProtocolID {
		t.Fatalf("the old peer's stream speaks %q, want %s", p, ProtocolID)
	}
}

// TestQueueTakesUnitsWhole: the peer queue counts messages but takes or
// refuses a unit whole: a batch larger than QueueLen goes into an empty
// queue, and nothing more is taken until the queue drains.
func TestQueueTakesUnitsWhole(t *testing.T) {
	const queueLen = 8
	a := newTestHost(t, 1, testKey, func(c *Config) {
		c.QueueLen = queueLen
		// The first failed dial parks the sender for the whole test, so
		// the queue only fills.
		c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour
	})
	gone := newTestHost(t, 2, testKey)
	addr, pid := gone.Addrs()[0], gone.PeerID()
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPeer(2, pid, addr); err != nil {
		t.Fatal(err)
	}
	a.Send(2, named("", 1, 2, 0))
	waitFor(t, "the first send to fail", func() bool { return dropped(a, DropSendFailed) == 1 })

	batch := func(n int) []protocols.Message {
		out := make([]protocols.Message, n)
		for i := range out {
			out[i] = named("db", 1, 2, uint64(i))
		}
		return out
	}
	a.SendAll(batch(3 * queueLen)) // larger than the bound, into an empty queue: taken
	if d := dropped(a, DropQueueFull); d != 0 {
		t.Fatalf("a batch into an empty queue was refused: %d drops", d)
	}
	a.Send(2, named("", 1, 2, 1)) // the queue is over its bound: refused
	a.SendAll(batch(5))           // refused whole, one drop per message
	if d := dropped(a, DropQueueFull); d != 6 {
		t.Fatalf("%d queue_full drops, want 6", d)
	}
}

// TestQueueBoundAdmitsBelowIt: below the bound every unit is taken, so a
// queue of QueueLen messages holds QueueLen-1 plus one unit at most.
func TestQueueBoundAdmitsBelowIt(t *testing.T) {
	const queueLen = 8
	a := newTestHost(t, 1, testKey, func(c *Config) {
		c.QueueLen = queueLen
		c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour
	})
	gone := newTestHost(t, 2, testKey)
	addr, pid := gone.Addrs()[0], gone.PeerID()
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPeer(2, pid, addr); err != nil {
		t.Fatal(err)
	}
	a.Send(2, named("", 1, 2, 0))
	waitFor(t, "the first send to fail", func() bool { return dropped(a, DropSendFailed) == 1 })
	for range queueLen - 1 {
		a.Send(2, named("", 1, 2, 1))
	}
	a.SendAll([]protocols.Message{named("a", 1, 2, 2), named("b", 1, 2, 3), named("c", 1, 2, 4)})
	if d := dropped(a, DropQueueFull); d != 0 {
		t.Fatalf("%d queue_full drops below the bound", d)
	}
	a.Send(2, named("", 1, 2, 5))
	if d := dropped(a, DropQueueFull); d != 1 {
		t.Fatalf("%d queue_full drops over the bound, want 1", d)
	}
	if q := a.peerOf(2).queued.Load(); q != queueLen-1+3 {
		t.Fatalf("%d messages queued, want %d", q, queueLen-1+3)
	}
}

// TestBadBatchFramesAreRefused: on a v2 stream, a frame with one message
// that speaks for another member, or a v1 body, is refused whole and the
// stream closed; on a v1 stream, a body with an election name is refused
// rather than taken for the default election's.
func TestBadBatchFramesAreRefused(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	raw := newRawHost(t, testKey)
	if err := b.SetPeer(7, raw.ID().String(), raw.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.Decode(b.PeerID())
	for _, addr := range b.Addrs() {
		full, _ := peer.AddrInfoFromString(addr)
		raw.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
	}
	frame := func(t *testing.T, msgs ...protocols.Message) []byte {
		f, err := AppendBatchFrame(nil, msgs)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	v1Named := func(t *testing.T) []byte {
		body, err := newMapEncoder().encode(named("db", 7, 2, 0))
		if err != nil {
			t.Fatal(err)
		}
		return frameOf(body)
	}
	v1Valid, err := EncodeFrame(named("", 7, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		protocol protocol.ID
		data     func(t *testing.T) []byte
		reason   string
	}{
		{"spoofed_in_batch", BatchProtocolID, func(t *testing.T) []byte {
			return frame(t, named("db", 7, 2, 0), named("db", 8, 2, 0))
		}, DropSpoofedFrom},
		{"v1_body_on_v2", BatchProtocolID, func(*testing.T) []byte { return v1Valid }, ReasonMalformed},
		{"el_on_v1", ProtocolID, v1Named, ReasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := dropped(b, c.reason)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			s, err := raw.NewStream(ctx, bID, c.protocol)
			cancel()
			if err != nil {
				t.Fatalf("NewStream: %v", err)
			}
			defer s.Close()
			// A valid frame first: it is delivered, the bad one is not.
			var valid []byte
			if c.protocol == BatchProtocolID {
				valid = frame(t, named("db", 7, 2, 1), named("", 7, 2, 2))
			} else {
				valid = v1Valid
			}
			if _, err := s.Write(append(valid, c.data(t)...)); err != nil {
				t.Fatalf("write: %v", err)
			}
			waitFor(t, "drop reason "+c.reason, func() bool { return dropped(b, c.reason) > before })
			n := 0
			for {
				select {
				case m := <-b.Inbound():
					if m.From != 7 || (c.protocol == BatchProtocolID && m.Context == 0) {
						t.Fatalf("delivered %v", m)
					}
					n++
					continue
				default:
				}
				break
			}
			if want := map[protocol.ID]int{BatchProtocolID: 2, ProtocolID: 1}[c.protocol]; n != want {
				t.Fatalf("delivered %d messages, want the valid frame's %d", n, want)
			}
		})
	}
}
