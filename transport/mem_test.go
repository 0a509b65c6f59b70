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
