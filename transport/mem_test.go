package transport

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

func memPair(t *testing.T, inboundLen int) (*MemNetwork, *MemTransport, *MemTransport) {
	t.Helper()
	n := NewMemNetwork()
	a, b := n.Node(1, inboundLen), n.Node(2, inboundLen)
	t.Cleanup(func() { a.Close(); b.Close() })
	if err := a.SetPeer(2, b.PeerID(), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPeer(1, a.PeerID(), ""); err != nil {
		t.Fatal(err)
	}
	return n, a, b
}

func TestMemExchange(t *testing.T) {
	_, a, b := memPair(t, 0)
	a.Send(2, msg(protocols.MsgVote, 1, 2, 1))
	b.Send(1, msg(protocols.MsgVoteResp, 2, 1, 1))
	if m := <-b.Inbound(); m.Kind != protocols.MsgVote || m.From != 1 {
		t.Fatalf("b got %v", m)
	}
	if m := <-a.Inbound(); m.Kind != protocols.MsgVoteResp || m.From != 2 {
		t.Fatalf("a got %v", m)
	}
	if s := a.Stats(); s.Sent["Vote"] != 1 || s.Received["VoteResp"] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMemKeepsTheHostsRules(t *testing.T) {
	n, a, b := memPair(t, 2)
	c := n.Node(3, 0)
	defer c.Close()
	if err := c.SetPeer(2, b.PeerID(), ""); err != nil {
		t.Fatal(err)
	}
	c.Send(2, msg(protocols.MsgVote, 3, 2, 0)) // b never admitted c
	a.Send(2, msg(protocols.MsgVote, 3, 2, 0)) // a claims to be 3
	a.Send(2, msg(protocols.MsgVote, 1, 9, 0)) // not for b
	a.Send(9, msg(protocols.MsgVote, 1, 9, 0)) // unknown member
	a.Send(2, protocols.Message{Kind: 200, From: 1, To: 2})
	for i := range 3 { // inbound holds 2
		a.Send(2, msg(protocols.MsgVote, 1, 2, uint64(i)))
	}
	bs, as := b.Stats(), a.Stats()
	want := map[string]uint64{DropUnauthorized: 1, DropSpoofedFrom: 1, DropMisaddressed: 1, DropInboundFull: 1}
	for r, v := range want {
		if bs.Dropped[r] != v {
			t.Errorf("b dropped[%s] = %d, want %d (%+v)", r, bs.Dropped[r], v, bs)
		}
	}
	if as.Dropped[DropUnknownPeer] != 1 || as.Dropped[ReasonUnknownKind] != 1 {
		t.Errorf("a stats %+v", as)
	}
	if len(b.Inbound()) != 2 {
		t.Fatalf("b holds %d messages, want 2", len(b.Inbound()))
	}
	b.RemovePeer(1)
	<-b.Inbound()
	<-b.Inbound()
	a.Send(2, msg(protocols.MsgVote, 1, 2, 9))
	if len(b.Inbound()) != 0 || b.Stats().Dropped[DropUnauthorized] != 2 {
		t.Fatalf("removed peer still delivered: %+v", b.Stats())
	}
}

func TestMemClose(t *testing.T) {
	_, a, b := memPair(t, 0)
	b.Close()
	if _, ok := <-b.Inbound(); ok {
		t.Fatal("inbound open after Close")
	}
	a.Send(2, msg(protocols.MsgVote, 1, 2, 0))
	if a.Stats().Dropped[DropSendFailed] != 1 {
		t.Fatalf("stats %+v", a.Stats())
	}
	b.Send(1, msg(protocols.MsgVote, 2, 1, 0))
	if b.Stats().Dropped[DropClosed] != 1 {
		t.Fatalf("stats %+v", b.Stats())
	}
}

// TestMemSendAll: the twin coalesces as the Host does (one write, one
// frame per member for a SendAll), keeps election names, drops alone a
// message the wire would refuse, and refuses a frame whole for a spoofed
// From.
func TestMemSendAll(t *testing.T) {
	n, a, b := memPair(t, 0)
	c := n.Node(3, 0)
	t.Cleanup(func() { c.Close() })
	if err := a.SetPeer(3, c.PeerID(), ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPeer(1, a.PeerID(), ""); err != nil {
		t.Fatal(err)
	}
	var msgs []protocols.Message
	for i, el := range testElections {
		msgs = append(msgs, named(el, 1, 2, uint64(i)), named(el, 1, 3, uint64(i)))
	}
	msgs = append(msgs, named("default", 1, 2, 99)) // refused by the encoder, alone
	a.SendAll(msgs)
	for _, y := range []*MemTransport{b, c} {
		for i, el := range testElections {
			if m := <-y.Inbound(); m.Election != el || m.Context != uint64(i) {
				t.Fatalf("node %d got %v, want election %q context %d", y.self, m, el, i)
			}
		}
		if len(y.Inbound()) != 0 {
			t.Fatalf("node %d got more: %v", y.self, <-y.Inbound())
		}
	}
	st := a.Stats()
	if st.Writes != 2 || st.FramesSent != 2 || st.Dropped[ReasonOutOfRange] != 1 || st.Sent["Heartbeat"] != uint64(2*len(testElections)) {
		t.Fatalf("a's stats %+v", st)
	}
	if st := b.Stats(); st.FramesReceived != 1 {
		t.Fatalf("b's stats %+v, want one frame", st)
	}

	b.SendAll([]protocols.Message{named("db", 2, 1, 1), named("db", 3, 1, 2)})
	if len(a.Inbound()) != 0 || a.Stats().Dropped[DropSpoofedFrom] != 1 {
		t.Fatalf("a took a frame with a spoofed From: %+v", a.Stats())
	}
}
