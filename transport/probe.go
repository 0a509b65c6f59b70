package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
)

// ProbeProtocolID is the libp2p stream protocol of reachability probes: the
// prober writes probeSize random bytes, the member echoes them and both
// close. Only current members may open it (the gater and the handler
// check).
const ProbeProtocolID = "/conclave/probe/1"

const probeSize = 8

// ProbeStreamProtocolID is the long-lived form of ProbeProtocolID: the
// prober keeps the stream and sends each probe on it, and the member echoes
// each until the stream closes. A probe then costs one small frame each
// way instead of a stream's opening, protocol negotiation and closing
// (several frames and a goroutine on each side). A prober offers both and
// uses the one-shot form with members that only know it.
const ProbeStreamProtocolID = "/conclave/probe/2"

// probeStreamIdle bounds how long a member's long-lived probe stream may
// stay silent before its handler lets it go (the prober opens another):
// longer than the slowest probe period of a large fleet, short enough
// that a forgotten stream does not hold a goroutine for ever.
const probeStreamIdle = 30 * time.Minute

// Probe timing defaults (see Config.ProbeAfter and Config.ProbeTimeout).
const (
	// DefaultProbeAfter: a member silent this long is probed, and probed
	// again at most this often. Election traffic (a leader's heartbeats
	// every 50 ms, a majority follower's answers) keeps most pairs from
	// ever needing one; a bully or ring leader, whose followers do not
	// answer, probes each of them at this period, and followers of a
	// majority leader probe each other at the slow speed. With
	// DefaultProbeTimeout, a member whose link silently drops is
	// unreachable about 0.8 s after it was last heard (it was 1.5–2 s with 500 ms and 1 s; docs/multihost.md,
	// "Half-open links", has both, and what the bully leader's extra
	// probes cost).
	DefaultProbeAfter = 300 * time.Millisecond
	// DefaultProbeTimeout bounds a probe's echo over an open connection:
	// one round trip, well under a millisecond on a LAN. A probe that
	// times out there means the connection is half-open (the host
	// vanished without a FIN or an RST): the connection is closed so the
	// sender dials afresh instead of writing into the void until TCP's
	// retransmission timeout, minutes later. A probe that has to dial
	// first gets the dial timeout instead (probe): a dial and its
	// handshakes take several round trips.
	DefaultProbeTimeout = 500 * time.Millisecond
	// DefaultIdleProbeAfter: the slow speed, for members this node sends
	// nothing to (followers of one leader, observers). Each probe opens a
	// stream and wakes both processes; at the fast speed an idle agent
	// spent most of its CPU probing its fleet (docs/benchmarks/analysis.md).
	DefaultIdleProbeAfter = 5 * time.Second
	// DefaultIdleProbeSpacing: a fleet agent with 99 idle members probes
	// each every 99 s, one probe a second in all (and answers about as
	// many).
	DefaultIdleProbeSpacing = time.Second
)

// probeTimes is what the prober knows of one member at one instant; the
// choices below are pure functions of it so they can be tested without a
// clock. A member is probed at one of two speeds:
//
//   - fast (ProbeAfter): this node sent the member something within
//     IdleProbeAfter, so a half-open connection would lose election
//     traffic; or the last probe failed, so the member is suspect and
//     should be seen back soon; and toward a member no probe reached yet.
//   - slow (idleAfter): nothing is at stake but the reachability count of
//     an idle member, which may lag.
type probeTimes struct {
	now, heard, sent, fastSince int64 // UnixNano; sent 0 = never
	failed                      bool
	// answered: a probe of this member succeeded once. Until then it is
	// probed at the fast speed, which also opens the connection: an
	// election's first vote request to a member nobody talked to would
	// otherwise wait for a dial and a Noise handshake.
	answered bool
	// spoke: the member was heard (a message, a probe of ours answered,
	// a probe of its own) since it was admitted; admission alone counts
	// as heard without this (reachable spares such a member a failure
	// for ProbeAfter).
	spoke bool
	// lastProbe is when the last probe of it started (UnixNano, 0 for
	// never); fails counts its probes that failed since it was last heard.
	lastProbe int64
	fails     int32
}

// active: sent something within window.
func (p probeTimes) active(window time.Duration) bool {
	return p.sent != 0 && time.Duration(p.now-p.sent) <= window
}

// probeAfter is how much silence earns the member a probe.
func (t *Host) probeAfter(p probeTimes, idleAfter time.Duration) time.Duration {
	if p.failed || !p.answered || p.active(t.cfg.IdleProbeAfter) {
		return t.cfg.ProbeAfter
	}
	return idleAfter
}

// retryAfter is how long after its last probe a member whose probes keep
// failing is probed again: ProbeAfter, doubling with each failure up to
// IdleProbeAfter. A dead member is kept (it may be only partitioned away)
// until gossip forgets it, up to a day; probed every ProbeAfter it cost a
// dial every 300 ms. A member that comes back dials this node itself
// (its own prober and sender), which counts as heard and resets this.
func (t *Host) retryAfter(p probeTimes, after time.Duration) time.Duration {
	if !p.failed || p.fails <= 1 {
		return after
	}
	return min(after<<min(p.fails-1, 16), max(after, t.cfg.IdleProbeAfter))
}

// idleAfter is the slow speed with n idle members: IdleProbeAfter, or
// n·IdleProbeSpacing when that is longer, so the probe rate toward idle
// members stays bounded however large the fleet.
func (t *Host) idleAfter(n int) time.Duration {
	return max(t.cfg.IdleProbeAfter, time.Duration(n)*t.cfg.IdleProbeSpacing)
}

// reachable decides Reachable from the member's times.
//
//   - A probe, or a sender's connection, failed since the member was
//     last heard: unreachable, at once. A probe starts after ProbeAfter
//     of silence and counts as failed only when nothing was heard while
//     it ran, so this is news of the member, not of a slow answer;
//     waiting out the fast window on top of it kept a member killed and
//     restarted under a new identity "reachable" for up to 2 s after it
//     refused every dial. A member admitted less than ProbeAfter ago
//     that has not spoken yet is spared: at a cold start two members
//     learn each other a moment apart, and the first to know is refused
//     until the other does.
//   - Heard within the fast window: reachable.
//   - Fast for a whole fast window and still silent: unreachable (it was
//     probed at the fast speed and never answered).
//   - Otherwise (idle): reachable while heard within the slow window; a
//     member that just turned fast keeps this until its first fast probe
//     decides, so reachability does not flap when traffic starts.
func (t *Host) reachable(p probeTimes, idleAfter time.Duration) bool {
	silent := time.Duration(p.now - p.heard)
	if p.failed && (p.spoke || silent > t.cfg.ProbeAfter) {
		return false
	}
	if silent <= t.window(t.cfg.ProbeAfter) {
		return true
	}
	if p.active(t.cfg.IdleProbeAfter) && time.Duration(p.now-p.fastSince) > t.window(t.cfg.ProbeAfter) {
		return false
	}
	return silent <= t.window(idleAfter)
}

// window is how long a member counts as reachable after it was last heard
// when it is probed after `after` of silence: the probe has ProbeTimeout
// to answer; one more `after` absorbs a probe that starts late.
func (t *Host) window(after time.Duration) time.Duration {
	return 2*after + t.cfg.ProbeTimeout
}

func (ps *peerState) times(now int64) probeTimes {
	return probeTimes{now: now, heard: ps.heard.Load(), sent: ps.sent.Load(),
		fastSince: ps.fastSince.Load(), failed: ps.failed.Load(), answered: ps.answered.Load(),
		spoke: ps.spoke.Load(), lastProbe: ps.lastProbe.Load(), fails: ps.fails.Load()}
}

// sending records that a message is queued for ps: the member turns fast
// (see probeTimes) for IdleProbeAfter.
func (t *Host) sending(ps *peerState) {
	now := time.Now().UnixNano()
	prev := ps.sent.Swap(now)
	if prev == 0 || time.Duration(now-prev) > t.cfg.IdleProbeAfter {
		ps.fastSince.Store(now)
		t.kickProber() // it turned fast: due sooner than planned
	}
}

// heard records that the member answered or sent something. A member heard
// again after a silence also wakes its sender, which may be waiting out a
// backoff of up to MaxBackoff from the time it was unreachable.
func (t *Host) heard(ps *peerState) {
	now := time.Now().UnixNano()
	prev := ps.heard.Swap(now)
	ps.failed.Store(false)
	ps.fails.Store(0)
	ps.spoke.Store(true)
	if time.Duration(now-prev) >= t.cfg.ProbeAfter {
		ps.wake()
	}
}

// wake cuts the sender's backoff short.
func (ps *peerState) wake() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// Reachable implements Transport: whether id was heard from (a message, a
// probe, or an answer to ours) recently enough for the speed it is probed
// at (see reachable). A member out of probing (SetProbed) is judged as an
// idle one, from its own traffic alone.
func (t *Host) Reachable(id protocols.ID) bool {
	t.mu.RLock()
	ps := t.peers[id]
	t.mu.RUnlock()
	if ps == nil {
		return false
	}
	return t.reachable(ps.times(time.Now().UnixNano()), time.Duration(t.idleAfterNow.Load()))
}

// Bounds of the prober's sleep between looks at its members. It sleeps
// until the first member falls due, and is kicked when one may fall due
// sooner (kickProber); proberMaxSleep is a safety net and keeps the slow
// speed (idleAfterNow) current as members turn idle, proberMinSleep keeps
// a member due but not probed (its probe in flight) from spinning it.
const (
	proberMaxSleep = time.Second
	proberMinSleep = time.Millisecond
)

// runProber probes silent members: each fast member once it has been
// silent for ProbeAfter, and the idle ones once silent for the slow speed,
// one at a time at most every slow period ÷ idle members, so that their
// probes spread out instead of starting together. Between looks it sleeps
// until the next member is due. It used to look every ProbeAfter/3 whether
// or not anything was due: ten wake-ups a second in every agent, which
// were most of an idle observer's own work beside memberlist's.
func (t *Host) runProber() {
	defer t.wg.Done()
	timer := time.NewTimer(t.cfg.ProbeAfter)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-timer.C:
		case <-t.probeKick:
		}
		wait, ok := t.probeDue(time.Now().UnixNano())
		if !ok {
			return
		}
		timer.Reset(wait)
	}
}

// kickProber wakes the prober to look at its members now.
func (t *Host) kickProber() {
	select {
	case t.probeKick <- struct{}{}:
	default:
	}
}

// probeDue starts a probe toward each member due at now and returns how
// long the prober may sleep before the next one is due; ok is false once
// the host is closed.
func (t *Host) probeDue(now int64) (wait time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, false
	}
	idle := 0
	for _, ps := range t.peers {
		if ps.probed && t.probeAfter(ps.times(now), 0) != t.cfg.ProbeAfter {
			idle++
		}
	}
	idleAfter := t.idleAfter(idle)
	t.idleAfterNow.Store(int64(idleAfter))
	spacing := int64(idleAfter) / int64(max(idle, 1))
	next := now + int64(proberMaxSleep)
	for _, ps := range t.peers {
		if !ps.probed || ps.probing {
			continue // a probe in flight kicks the prober when it ends
		}
		p := ps.times(now)
		after := t.probeAfter(p, idleAfter)
		// Silent for `after`, and not probed within it either: a member
		// that stays silent (dead, unplugged) is probed once per
		// `after`, not on every look.
		due := max(p.heard+int64(after), p.lastProbe+int64(t.retryAfter(p, after)))
		if after != t.cfg.ProbeAfter {
			due = max(due, t.nextIdleProbe)
		}
		if due > now {
			next = min(next, due)
			continue
		}
		if after != t.cfg.ProbeAfter {
			t.nextIdleProbe = now + spacing
		}
		ps.probing = true
		ps.lastProbe.Store(now)
		ps.probes.Add(1)
		t.wg.Add(1)
		go t.probe(ps)
	}
	return max(time.Duration(next-now), proberMinSleep), true
}

// probe asks ps for an echo. On success the member is heard; when it times
// out over a connection that is open, that connection is closed.
func (t *Host) probe(ps *peerState) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		ps.probing = false
		t.mu.Unlock()
		// Its next probe is due from now on (retryAfter).
		t.kickProber()
	}()
	connected := t.h.Network().Connectedness(ps.pid) == network.Connected
	heardBefore := ps.heard.Load()
	timeout := t.cfg.ProbeTimeout
	if !connected {
		// A dial, Noise, the admission handshake and protocol selection
		// take several round trips: cut short at the echo's bound, a
		// probe over a long link would never connect an idle member.
		timeout = max(timeout, t.cfg.DialTimeout)
	}
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	err := t.echo(ctx, ps)
	if err == nil {
		ps.answered.Store(true)
		t.heard(ps)
		return
	}
	if t.ctx.Err() != nil {
		return
	}
	select {
	case <-ps.stop:
		return
	default:
	}
	if ps.heard.Load() == heardBefore {
		// Suspect until heard again: unreachable at once, whatever its
		// speed, and probed at the fast speed (retryAfter).
		ps.failed.Store(true)
		ps.fails.Add(1)
	}
	// Anything heard meanwhile (a message on that very connection) shows
	// it is not half-open, only slow: a starved host must not lose its
	// connections on top of its time slices.
	if connected && errors.Is(err, context.DeadlineExceeded) && ps.heard.Load() == heardBefore {
		t.log.Info("peer did not answer a probe over an open connection; closing it as half-open",
			zap.Uint64("member", uint64(ps.id)), zap.Stringer("peer", ps.pid), zap.Duration("timeout", timeout))
		_ = t.h.Network().ClosePeer(ps.pid)
		return
	}
	t.log.Debug("probe failed", zap.Uint64("member", uint64(ps.id)), zap.Stringer("peer", ps.pid), zap.Error(err))
}

// echo sends one probe and waits for its echo. It reuses the member's
// long-lived probe stream when it has one; a reused stream that fails
// before the deadline (the member restarted, or let an idle stream go) is
// replaced once within the same probe.
func (t *Host) echo(ctx context.Context, ps *peerState) error {
	if s := ps.takeProbeStream(); s != nil {
		err := t.echoOn(ctx, ps, s, true)
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	s, err := t.h.NewStream(ctx, ps.pid, protocol.ID(ProbeStreamProtocolID), protocol.ID(ProbeProtocolID))
	if err != nil {
		return fmt.Errorf("open probe stream: %w", err)
	}
	ps.probeStreams.Add(1)
	return t.echoOn(ctx, ps, s, s.Protocol() == ProbeStreamProtocolID)
}

// takeProbeStream hands the member's long-lived probe stream, if any, to
// the probe that will use it.
func (ps *peerState) takeProbeStream() network.Stream {
	ps.probeMu.Lock()
	defer ps.probeMu.Unlock()
	s := ps.probeStream
	ps.probeStream = nil
	return s
}

// keepProbeStream keeps s for the next probe, or resets it when the member
// was removed or replaced meanwhile (or s is nil: then the kept one goes).
func (ps *peerState) keepProbeStream(s network.Stream) {
	ps.probeMu.Lock()
	defer ps.probeMu.Unlock()
	select {
	case <-ps.stop:
		if s != nil {
			_ = s.Reset()
		}
		s = nil
	default:
	}
	if ps.probeStream != nil && ps.probeStream != s {
		_ = ps.probeStream.Reset()
	}
	ps.probeStream = s
}

// echoOn probes over s; a long-lived stream that answered is kept for the
// next probe.
func (t *Host) echoOn(ctx context.Context, ps *peerState, s network.Stream, keep bool) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	var out, in [probeSize]byte
	_, _ = rand.Read(out[:])
	if deadline, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(deadline)
	}
	if _, err := s.Write(out[:]); err != nil {
		_ = s.Reset()
		return t.probeErr(ctx, fmt.Errorf("write probe: %w", err))
	}
	if !keep {
		_ = s.CloseWrite()
	}
	if _, err := io.ReadFull(s, in[:]); err != nil {
		_ = s.Reset()
		return t.probeErr(ctx, fmt.Errorf("read probe answer: %w", err))
	}
	if !bytes.Equal(in[:], out[:]) {
		_ = s.Reset()
		return errors.New("probe answer does not echo the probe")
	}
	if !keep || !stop() {
		// One-shot, or the deadline fired and reset it just now.
		_ = s.Close()
		return nil
	}
	_ = s.SetDeadline(time.Time{})
	ps.keepProbeStream(s)
	return nil
}

// probeErr reports a deadline that cut a probe short as such, whatever
// error the reset stream returned.
func (t *Host) probeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// handleProbeStream echoes every probe a member sends on its long-lived
// probe stream until the member closes it, goes quiet for
// probeStreamIdle, or is no longer a member.
func (t *Host) handleProbeStream(s network.Stream) {
	ps := t.probingMember(s)
	if ps == nil {
		return
	}
	var b [probeSize]byte
	for {
		_ = s.SetReadDeadline(time.Now().Add(probeStreamIdle))
		if _, err := io.ReadFull(s, b[:]); err != nil {
			_ = s.Reset()
			return
		}
		_ = s.SetWriteDeadline(time.Now().Add(t.cfg.ProbeTimeout))
		if _, err := s.Write(b[:]); err != nil {
			_ = s.Reset()
			return
		}
		// Disarmed at once: left armed until the next probe (seconds
		// away), its timer fired and woke this idle process for nothing,
		// once for every probe it answered; a voter answers each
		// observer's probes (one every 5 s from each), so a voter of a
		// 250-agent fleet woke about 50 times a second for it.
		_ = s.SetWriteDeadline(time.Time{})
		select {
		case <-ps.stop:
			_ = s.Reset()
			return
		default:
		}
		t.heard(ps)
	}
}

// probingMember returns the member that opened s, or nil (and s reset)
// when it is none.
func (t *Host) probingMember(s network.Stream) *peerState {
	t.mu.RLock()
	ps := t.peers[t.byPeer[s.Conn().RemotePeer()]]
	closed := t.closed
	t.mu.RUnlock()
	if ps == nil || closed {
		t.stats.drop(DropUnauthorized)
		_ = s.Reset()
		return nil
	}
	return ps
}

// handleProbe echoes one probe from a member (the one-shot form).
func (t *Host) handleProbe(s network.Stream) {
	ps := t.probingMember(s)
	if ps == nil {
		return
	}
	_ = s.SetDeadline(time.Now().Add(t.cfg.ProbeTimeout))
	var b [probeSize]byte
	if _, err := io.ReadFull(s, b[:]); err != nil {
		_ = s.Reset()
		return
	}
	if _, err := s.Write(b[:]); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
	t.heard(ps)
}
