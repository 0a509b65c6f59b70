package transport

import (
	"context"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/conclave-agent/conclave/protocols"
)

// TestLeanHostTalksToStockLibp2p: a host built by libp2p.New (identify,
// basic host — how earlier versions built theirs, so a cluster in a rolling
// upgrade has both) and the lean host exchange election frames both ways.
// TestBadFramesAreDroppedAndCounted covers stock → lean on bad frames.
func TestLeanHostTalksToStockLibp2p(t *testing.T) {
	b := newTestHost(t, 2, testKey)
	stock := newRawHost(t, testKey)
	got := make(chan protocols.Message, 1)
	stock.SetStreamHandler(protocol.ID(ProtocolID), func(s network.Stream) {
		defer s.Close()
		m, err := ReadFrame(s, 1<<16)
		if err != nil {
			t.Errorf("stock host reading the lean host's frame: %v", err)
			return
		}
		got <- m
	})
	if err := b.SetPeer(7, stock.ID().String(), stock.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	b.Send(7, msg(protocols.MsgVote, 2, 7, 42))
	select {
	case m := <-got:
		if m.From != 2 || m.To != 7 || m.Context != 42 {
			t.Fatalf("stock host got %v", m)
		}
	case <-contextDone(t):
		t.Fatal("the stock libp2p host never got the lean host's frame")
	}

	bID, _ := peer.Decode(b.PeerID())
	for _, addr := range b.Addrs() {
		full, _ := peer.AddrInfoFromString(addr)
		stock.Peerstore().AddAddrs(bID, full.Addrs, peerstore.PermanentAddrTTL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s, err := stock.NewStream(ctx, bID, protocol.ID(ProtocolID))
	if err != nil {
		t.Fatalf("stock host opening an election stream to the lean host: %v", err)
	}
	defer s.Close()
	frame, err := EncodeFrame(msg(protocols.MsgVote, 7, 2, 43))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(frame); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b); m.From != 7 || m.Context != 43 {
		t.Fatalf("lean host got %v", m)
	}
}

func contextDone(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx.Done()
}

// A voter is connected to every observer that probes it: on a small host
// the memory-scaled limits (80 inbound connections at 4 GiB) refused
// them, and the voters' own connections with them. The limits follow
// file descriptors instead, and never fall below libp2p's.
func TestConnLimitsFollowFileDescriptors(t *testing.T) {
	small := rcmgr.DefaultLimits.Scale(512<<20, 20000) // an eighth of 4 GiB
	got := connLimits(small).ToPartialLimitConfig()
	was := small.ToPartialLimitConfig()
	if was.System.ConnsInbound >= 1000 {
		t.Fatalf("the premise is gone: libp2p scales %d inbound connections at 512 MiB", was.System.ConnsInbound)
	}
	if got.System.ConnsInbound != was.System.FD || got.System.Conns != was.System.FD {
		t.Errorf("system connections %d (inbound %d), want the FD limit %d", got.System.Conns, got.System.ConnsInbound, was.System.FD)
	}
	if got.Transient.ConnsInbound < was.Transient.ConnsInbound || got.Transient.ConnsInbound < was.System.FD/4 {
		t.Errorf("transient inbound %d, want at least %d and a quarter of %d", got.Transient.ConnsInbound, was.Transient.ConnsInbound, was.System.FD)
	}
	if got.System.Streams != was.System.Streams || got.PeerDefault.Conns != was.PeerDefault.Conns {
		t.Errorf("streams or per-peer limits changed: %d/%d, %d/%d", got.System.Streams, was.System.Streams, got.PeerDefault.Conns, was.PeerDefault.Conns)
	}
	// A process with few descriptors never gets less than libp2p gives.
	tiny := rcmgr.DefaultLimits.Scale(512<<20, 100)
	c, w := connLimits(tiny).ToPartialLimitConfig().System, tiny.ToPartialLimitConfig().System
	if c.Conns < w.Conns || c.ConnsInbound < w.ConnsInbound || c.ConnsOutbound < w.ConnsOutbound {
		t.Errorf("with 100 descriptors the limits fell: %+v, was %+v", c, w)
	}
}
