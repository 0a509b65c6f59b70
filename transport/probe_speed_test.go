package transport

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/conclave-agent/conclave/protocols"
)

// speedHost is a Host with only the probe settings, for the pure choices.
func speedHost() *Host {
	cfg := Config{ProbeAfter: 500 * time.Millisecond, ProbeTimeout: time.Second,
		IdleProbeAfter: 5 * time.Second, IdleProbeSpacing: time.Second}
	return &Host{cfg: cfg}
}

func TestProbeSpeed(t *testing.T) {
	h := speedHost()
	const s = int64(time.Second)
	now := 1000 * s
	idle := h.idleAfter(4)
	for _, c := range []struct {
		name string
		p    probeTimes
		want time.Duration
	}{
		{"never sent to", probeTimes{now: now, heard: now - s, answered: true}, idle},
		{"never probed yet", probeTimes{now: now, heard: now - s}, h.cfg.ProbeAfter},
		{"sent to just now", probeTimes{now: now, heard: now - s, sent: now - s/10, fastSince: now - 60*s, answered: true}, h.cfg.ProbeAfter},
		{"sent to within IdleProbeAfter", probeTimes{now: now, sent: now - 5*s, fastSince: now - 60*s, answered: true}, h.cfg.ProbeAfter},
		{"sent to longer ago", probeTimes{now: now, sent: now - 6*s, fastSince: now - 60*s, answered: true}, idle},
		{"last probe failed", probeTimes{now: now, heard: now - 20*s, failed: true, answered: true}, h.cfg.ProbeAfter},
	} {
		if got := h.probeAfter(c.p, idle); got != c.want {
			t.Errorf("%s: probed after %v, want %v", c.name, got, c.want)
		}
	}
	// The slow speed stretches with the number of idle members, so the
	// probe rate toward them is bounded.
	for n, want := range map[int]time.Duration{0: 5 * time.Second, 4: 5 * time.Second, 99: 99 * time.Second, 249: 249 * time.Second} {
		if got := h.idleAfter(n); got != want {
			t.Errorf("idleAfter(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestReachableAtTwoSpeeds(t *testing.T) {
	h := speedHost()
	const s = int64(time.Second)
	now := 1000 * s
	idle := h.idleAfter(4) // 5 s: window 11 s; the fast window is 2 s
	for _, c := range []struct {
		name string
		p    probeTimes
		want bool
	}{
		{"heard within the fast window", probeTimes{now: now, heard: now - 2*s}, true},
		// A failure since it was heard is news, whatever the window.
		{"heard within the fast window, its probe failed since", probeTimes{now: now, heard: now - s, failed: true, spoke: true}, false},
		// Admission counts as heard: a member refused at a cold start,
		// before it learned of this node, is spared for ProbeAfter.
		{"admitted 0.1 s ago, never spoke, a dial failed", probeTimes{now: now, heard: now - s/10, failed: true}, true},
		{"admitted 1 s ago, never spoke, a dial failed", probeTimes{now: now, heard: now - s, failed: true}, false},
		{"idle, heard within the slow window", probeTimes{now: now, heard: now - 10*s}, true},
		{"idle, heard before the slow window", probeTimes{now: now, heard: now - 12*s}, false},
		{"idle, its probe failed", probeTimes{now: now, heard: now - 3*s, failed: true}, false},
		{"fast for a whole fast window and silent", probeTimes{now: now, heard: now - 3*s, sent: now - s/20, fastSince: now - 3*s}, false},
		// Sending to an idle member must not make it unreachable before
		// a fast probe had a chance to answer.
		{"just turned fast, heard 4 s ago", probeTimes{now: now, heard: now - 4*s, sent: now - s/20, fastSince: now - s}, true},
	} {
		if got := h.reachable(c.p, idle); got != c.want {
			t.Errorf("%s: reachable %v, want %v", c.name, got, c.want)
		}
	}
}

// TestIdleMemberIsProbedSlowly: a member this host sends to and that never
// answers is probed at the fast speed (a half-open connection would lose
// election traffic); a member it sends nothing to is left alone until the
// slow speed comes due, after one probe that opens the connection. Before
// two speeds both were probed alike.
func TestIdleMemberIsProbedSlowly(t *testing.T) {
	speeds := func(c *Config) {
		c.ProbeAfter = 10 * time.Millisecond
		c.IdleProbeAfter = time.Hour
	}
	a := newTestHost(t, 1, nil, speeds)
	b := newTestHost(t, 2, nil)
	c := newTestHost(t, 3, nil)
	for _, p := range []*testHost{b, c} {
		admit(t, a, p)
		admit(t, p, a)
	}
	a.Send(3, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 3})
	waitUntil(t, "c to receive", func() bool { return len(c.Inbound()) > 0 })
	toC := a.peerOf(3)
	waitUntil(t, "a to probe c, which it sends to, three times", func() bool { return toC.probes.Load() >= 3 })
	// b is probed once, which opens the connection an election would
	// otherwise have to dial first, and then not again for an hour.
	if n := a.peerOf(2).probes.Load(); n > 1 {
		t.Errorf("a probed b, which it sends nothing to, %d times within its first hour; want at most once", n)
	}
	if !a.Reachable(2) || !a.Reachable(3) {
		t.Errorf("reachable: b %v, c %v; want both", a.Reachable(2), a.Reachable(3))
	}
}

// TestIdleMemberThatVanishesIsUnreachable: slow probing still notices a
// member that is gone, and says so at once when the probe fails.
func TestIdleMemberThatVanishesIsUnreachable(t *testing.T) {
	speeds := func(c *Config) {
		c.ProbeAfter = 10 * time.Millisecond
		c.ProbeTimeout = 200 * time.Millisecond
		c.IdleProbeAfter = 50 * time.Millisecond
		c.IdleProbeSpacing = time.Millisecond
	}
	a := newTestHost(t, 1, nil, speeds)
	b := newTestHost(t, 2, nil)
	admit(t, a, b)
	admit(t, b, a)
	toB := a.peerOf(2)
	waitUntil(t, "a to probe b", func() bool { return toB.probes.Load() >= 1 && !toB.failed.Load() })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a's probe of b to fail", func() bool { return toB.failed.Load() })
	waitUntil(t, "a to see b unreachable", func() bool { return !a.Reachable(2) })
}

// busyPair returns a prober a and a member b that a sends to and that
// never answers, so a probes it at the fast speed.
func busyPair(t *testing.T, prepare ...func(b *testHost)) (a, b *testHost) {
	t.Helper()
	a = newTestHost(t, 1, nil, func(c *Config) { c.ProbeAfter = 10 * time.Millisecond })
	b = newTestHost(t, 2, nil)
	for _, f := range prepare {
		f(b)
	}
	admit(t, a, b)
	admit(t, b, a)
	a.Send(2, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2})
	waitUntil(t, "b to receive", func() bool { return len(b.Inbound()) > 0 })
	return a, b
}

// TestProbesShareOneStream: probes of one member travel on one long-lived
// stream, one small frame each way, instead of opening, negotiating and
// closing a stream each (as every probe did before).
func TestProbesShareOneStream(t *testing.T) {
	a, _ := busyPair(t)
	toB := a.peerOf(2)
	waitUntil(t, "a to probe b six times", func() bool { return toB.probes.Load() >= 6 })
	if n := toB.probeStreams.Load(); n > 1 {
		t.Errorf("%d probes opened %d streams; want one long-lived stream", toB.probes.Load(), n)
	}
	if !a.Reachable(2) || toB.failed.Load() {
		t.Errorf("b reachable %v, last probe failed %v; want reachable", a.Reachable(2), toB.failed.Load())
	}
}

// TestProbesReachAMemberWithOnlyOneShotProbes: a member that knows only
// the one-shot probe protocol (an older agent, in a rolling upgrade) still
// answers every probe.
func TestProbesReachAMemberWithOnlyOneShotProbes(t *testing.T) {
	a, _ := busyPair(t, func(b *testHost) { b.h.RemoveStreamHandler(ProbeStreamProtocolID) })
	toB := a.peerOf(2)
	waitUntil(t, "a to open three one-shot probe streams to b", func() bool { return toB.probeStreams.Load() >= 3 })
	if toB.failed.Load() || !a.Reachable(2) {
		t.Errorf("b reachable %v, last probe failed %v; want its one-shot answers to count", a.Reachable(2), toB.failed.Load())
	}
}

// TestUnprobedMemberCostsNothing: a member taken out of probing before it
// is admitted is never probed and never dialled while it stays silent;
// put back, it is probed again. Before SetProbed, every agent of a fleet
// probed (and so connected to) every other.
func TestUnprobedMemberCostsNothing(t *testing.T) {
	a := newTestHost(t, 1, nil, func(c *Config) { c.ProbeAfter = 10 * time.Millisecond })
	b := newTestHost(t, 2, nil)
	c := newTestHost(t, 3, nil)
	a.SetProbed(2, false)
	for _, p := range []*testHost{b, c} {
		admit(t, a, p)
		admit(t, p, a)
	}
	// c, probed at the fast speed because a sends to it, is the
	// yardstick: once it had several probes, b had as many chances.
	a.Send(3, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 3})
	waitUntil(t, "a to probe c five times", func() bool { return a.peerOf(3).probes.Load() >= 5 })
	if n := a.peerOf(2).probes.Load(); n != 0 {
		t.Errorf("a probed b, which it was told not to probe, %d times", n)
	}
	if got := a.h.Network().Connectedness(b.h.ID()); got == network.Connected {
		t.Errorf("a is connected to b, which it never sent to nor probed")
	}
	a.SetProbed(2, true)
	waitUntil(t, "a to probe b once it may", func() bool { return a.peerOf(2).probes.Load() >= 1 })
}

func TestRetryAfterBacksOff(t *testing.T) {
	h := speedHost() // ProbeAfter 500 ms, IdleProbeAfter 5 s
	const ms = time.Millisecond
	for _, c := range []struct {
		p    probeTimes
		want time.Duration
	}{
		{probeTimes{}, 500 * ms},
		{probeTimes{failed: true, fails: 1}, 500 * ms},
		{probeTimes{failed: true, fails: 2}, 1000 * ms},
		{probeTimes{failed: true, fails: 4}, 4000 * ms},
		{probeTimes{failed: true, fails: 5}, 5000 * ms},
		{probeTimes{failed: true, fails: 40}, 5000 * ms},
		// Heard again: failed is cleared, and so is the count.
		{probeTimes{fails: 0}, 500 * ms},
	} {
		if got := h.retryAfter(c.p, h.cfg.ProbeAfter); got != c.want {
			t.Errorf("retryAfter(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
}

// TestProberSleepsUntilDue: the prober sleeps until the first member falls
// due, not a fixed fraction of ProbeAfter, and an idle member waits for the
// pace that spreads idle probes. It used to look every ProbeAfter/3, ten
// wake-ups a second in every agent whether or not any member was due.
func TestProberSleepsUntilDue(t *testing.T) {
	const ms = int64(time.Millisecond)
	now := time.Now().UnixNano()
	member := func(id protocols.ID, heard, sent int64) *peerState {
		ps := newPeerState(id, "", nil, 1)
		ps.probed = true
		ps.heard.Store(heard)
		ps.answered.Store(true)
		ps.spoke.Store(true)
		if sent != 0 {
			ps.sent.Store(sent)
			ps.fastSince.Store(sent)
		}
		return ps
	}
	for _, c := range []struct {
		name  string
		peers []*peerState
		// nextIdle is Host.nextIdleProbe, as an offset from now.
		nextIdle int64
		want     time.Duration
	}{
		// ProbeAfter is 500 ms: heard 100 ms ago, due in 400 ms.
		{"a fast member heard 100 ms ago", []*peerState{member(2, now-100*ms, now-10*ms)}, 0, 400 * time.Millisecond},
		{"the first of two fast members", []*peerState{member(2, now-100*ms, now-10*ms), member(3, now-300*ms, now-10*ms)}, 0, 200 * time.Millisecond},
		// Idle (slow speed 5 s): due in 4.5 s, but the prober looks at
		// least every proberMaxSleep.
		{"an idle member heard 0.5 s ago", []*peerState{member(2, now-500*ms, 0)}, 0, proberMaxSleep},
		// Due at once, but the last idle probe's pace holds it 300 ms.
		{"an idle member due while the pace holds", []*peerState{member(2, now-6000*ms, 0)}, 300 * ms, 300 * time.Millisecond},
	} {
		h := speedHost()
		h.peers = map[protocols.ID]*peerState{}
		for _, ps := range c.peers {
			h.peers[ps.id] = ps
		}
		h.nextIdleProbe = now + c.nextIdle
		wait, ok := h.probeDue(now)
		if !ok || wait != c.want {
			t.Errorf("%s: the prober sleeps %v (ok %v), want %v", c.name, wait, ok, c.want)
		}
		for _, ps := range c.peers {
			if ps.probing {
				t.Errorf("%s: member %d was probed, but none is due", c.name, ps.id)
			}
		}
	}
}

// TestSenderStartsAtFirstMessage: admitting members starts no goroutine
// per member; the first message queued for one starts its sender. An
// observer sends nothing to the other observers, and a sender started at
// admission made its goroutines grow by one per member of the fleet.
func TestSenderStartsAtFirstMessage(t *testing.T) {
	senders := func() int {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		return strings.Count(buf.String(), "transport.(*Host).runSender")
	}
	a := newTestHost(t, 1, nil)
	peers := []*testHost{newTestHost(t, 2, nil), newTestHost(t, 3, nil), newTestHost(t, 4, nil)}
	before := senders()
	for _, p := range peers {
		a.SetProbed(p.cfg.Self, false)
		admit(t, a, p)
		admit(t, p, a)
	}
	if n := senders() - before; n != 0 {
		t.Errorf("admitting 3 members started %d sender goroutines, want none before a message", n)
	}
	a.Send(3, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 3})
	waitUntil(t, "member 3 to receive", func() bool { return len(peers[1].Inbound()) > 0 })
	if n := senders() - before; n != 1 {
		t.Errorf("after one message to one member, %d sender goroutines run, want 1", n)
	}
}

// deadlineRecorder is a real stream that notes whether a write deadline
// is armed whenever its reader starts waiting.
type deadlineRecorder struct {
	network.Stream
	mu         sync.Mutex
	armed      bool
	reads      int
	armedWaits int
}

func (r *deadlineRecorder) SetWriteDeadline(d time.Time) error {
	r.mu.Lock()
	r.armed = !d.IsZero()
	r.mu.Unlock()
	return r.Stream.SetWriteDeadline(d)
}

func (r *deadlineRecorder) SetDeadline(d time.Time) error {
	r.mu.Lock()
	r.armed = !d.IsZero()
	r.mu.Unlock()
	return r.Stream.SetDeadline(d)
}

func (r *deadlineRecorder) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.reads++
	if r.armed {
		r.armedWaits++
	}
	r.mu.Unlock()
	return r.Stream.Read(p)
}

// TestProbeAnswerLeavesNoDeadlineArmed: a member answering probes on the
// long-lived stream disarms the echo's write deadline before it waits for
// the next probe. Left armed, the deadline's timer fired in the idle
// process after every answer: a wake-up per probe answered, which in a
// fleet is every observer's probes at every voter.
func TestProbeAnswerLeavesNoDeadlineArmed(t *testing.T) {
	var recs []*deadlineRecorder
	var mu sync.Mutex
	a, _ := busyPair(t, func(b *testHost) {
		b.h.SetStreamHandler(protocol.ID(ProbeStreamProtocolID), func(s network.Stream) {
			r := &deadlineRecorder{Stream: s}
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
			b.handleProbeStream(r)
		})
	})
	waitUntil(t, "a to probe b five times", func() bool { return a.peerOf(2).probes.Load() >= 5 })
	mu.Lock()
	defer mu.Unlock()
	reads, armed := 0, 0
	for _, r := range recs {
		r.mu.Lock()
		reads, armed = reads+r.reads, armed+r.armedWaits
		r.mu.Unlock()
	}
	if reads < 3 || armed > 0 {
		t.Fatalf("b waited for a probe %d times, %d of them with a write deadline still armed; want several waits, none armed", reads, armed)
	}
}
