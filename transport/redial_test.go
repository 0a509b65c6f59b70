package transport

import (
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/conclave-agent/conclave/protocols"
)

// TestRedialIgnoresSwarmBackoff: a member that was down when this node
// dialed it must be dialed again the moment this node decides to, once it
// is back. libp2p's swarm refused every dial to it for 5 s after a failed
// one ("dial backoff"), growing to minutes after more, whatever the
// sender's own backoff said: two hosts plugged back after an outage, or a
// host restarted, waited out each other's backoff.
func TestRedialIgnoresSwarmBackoff(t *testing.T) {
	dir := t.TempDir()
	a := newTestHost(t, 1, testKey)
	b := newTestHost(t, 2, testKey, func(c *Config) { c.DataDir = dir })
	listen := b.h.Network().ListenAddresses()[0].String()
	admit(t, a, b)
	// Nobody but a's own dial below may connect them.
	a.SetProbed(2, false)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ps := a.peerOf(2)
	if _, err := a.openStream(ps); err == nil {
		t.Fatal("b is closed, but a's stream to it opened")
	}
	sw := a.h.Network().(*swarm.Swarm)
	if !sw.Backoff().Backoff(ps.pid, ps.addr) {
		t.Fatal("the failed dial left no swarm backoff: the test no longer shows anything")
	}
	// b restarts: the same identity and address.
	b = newTestHost(t, 2, testKey, func(c *Config) { c.DataDir, c.Listen = dir, listen })
	b.SetProbed(1, false)
	admit(t, b, a)
	s, err := a.openStream(ps)
	if err != nil {
		t.Fatalf("b is back, but a cannot dial it: %v", err)
	}
	_ = s.Close()
}

// TestMemberConnRate: the connection rate limit lets a burst of
// reconnections to one LAN address through (libp2p's default refused the
// 17th and then allowed one every 5 s), still bounds a flood from one
// address, and leaves loopback alone.
func TestMemberConnRate(t *testing.T) {
	l := memberConnRate()
	lan := netip.MustParseAddr("192.168.77.1")
	for i := range 200 {
		if !l.Allow(lan) {
			t.Fatalf("connection %d from a LAN address refused", i+1)
		}
	}
	refused := 0
	for range 1000 {
		if !l.Allow(lan) {
			refused++
		}
	}
	if refused == 0 {
		t.Error("1200 connections from one address at once all allowed: no bound on a flood")
	}
	other := netip.MustParseAddr("192.168.77.2")
	if !l.Allow(other) {
		t.Error("one address's flood refused another address")
	}
	for i := range 5000 {
		if !l.Allow(netip.MustParseAddr("127.0.0.1")) {
			t.Fatalf("loopback connection %d refused", i+1)
		}
	}
}

// TestFailedSendIsUnreachableAtOnce: a member that spoke and then refuses
// the sender's connection is unreachable from that failure on, not once
// a probe fails too (here never: probes are an hour apart) or the window
// since it was last heard runs out.
func TestFailedSendIsUnreachableAtOnce(t *testing.T) {
	a := newTestHost(t, 1, nil, func(c *Config) {
		c.ProbeAfter = time.Hour
		c.IdleProbeAfter = time.Hour
	})
	b := newTestHost(t, 2, nil)
	admit(t, a, b)
	admit(t, b, a)
	b.Send(1, protocols.Message{Kind: protocols.MsgHeartbeatResp, From: 2, To: 1})
	select {
	case <-a.Inbound():
	case <-time.After(waitLimit):
		t.Fatal("a never heard b")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !a.Reachable(2) {
		t.Fatal("b is unreachable before anything was sent to it: the test no longer shows anything")
	}
	a.Send(2, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2})
	waitUntil(t, "a's sender to fail toward b", func() bool { return a.Stats().Dropped[DropSendFailed] > 0 })
	if a.Reachable(2) {
		t.Error("a's send to b failed, but a still counts b reachable")
	}
}

// TestSilentMemberProbedOncePerPeriod: a member that stays silent (here
// gone) is probed at most once per ProbeAfter, not on every tick of the
// prober, which looks several times per period so that a probe starts on
// time; and less often as its probes keep failing.
func TestSilentMemberProbedOncePerPeriod(t *testing.T) {
	const after = 30 * time.Millisecond
	a := newTestHost(t, 1, nil, func(c *Config) {
		c.ProbeAfter = after
		c.IdleProbeAfter = 4 * after // the longest pause between retries
	})
	b := newTestHost(t, 2, nil)
	admit(t, a, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ps := a.peerOf(2)
	start, first := time.Now(), ps.probes.Load()
	waitUntil(t, "a to probe the gone b ten times", func() bool { return ps.probes.Load()-first >= 10 })
	n, elapsed := ps.probes.Load()-first, time.Since(start)
	// One probe may start at the very beginning, one per period after it.
	if most := uint64(elapsed/after) + 2; n > most {
		t.Errorf("%d probes of a silent member in %v: more than one per %v (at most %d)", n, elapsed, after, most)
	}
}
