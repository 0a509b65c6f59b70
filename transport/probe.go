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

// Probe timing defaults (see Config.ProbeAfter and Config.ProbeTimeout).
const (
	// DefaultProbeAfter: a member silent this long is probed, and probed
	// again at most this often. Election traffic (a leader's heartbeats
	// every 50 ms, the answers) keeps most pairs from ever needing one;
	// followers of a majority leader probe each other.
	DefaultProbeAfter = 500 * time.Millisecond
	// DefaultProbeTimeout bounds one probe. A probe that times out on an
	// open connection means the connection is half-open (the host
	// vanished without a FIN or an RST): the connection is closed so the
	// sender dials afresh instead of writing into the void until TCP's
	// retransmission timeout, minutes later.
	DefaultProbeTimeout = time.Second
)

// heard records that the member answered or sent something. A member heard
// again after a silence also wakes its sender, which may be waiting out a
// backoff of up to MaxBackoff from the time it was unreachable.
func (t *Host) heard(ps *peerState) {
	now := time.Now().UnixNano()
	prev := ps.heard.Swap(now)
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
// probe, or an answer to ours) within ReachableWindow.
func (t *Host) Reachable(id protocols.ID) bool {
	t.mu.RLock()
	ps := t.peers[id]
	t.mu.RUnlock()
	if ps == nil {
		return false
	}
	return time.Since(time.Unix(0, ps.heard.Load())) <= t.reachableWindow()
}

// reachableWindow is how long a member counts as reachable after it was
// last heard: a live member is probed after ProbeAfter of silence, and the
// probe has ProbeTimeout to answer; one more ProbeAfter absorbs a probe
// that starts late.
func (t *Host) reachableWindow() time.Duration {
	return 2*t.cfg.ProbeAfter + t.cfg.ProbeTimeout
}

// runProber probes every silent member every ProbeAfter.
func (t *Host) runProber() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.ProbeAfter)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return
		}
		for _, ps := range t.peers {
			if ps.probing || now.Sub(time.Unix(0, ps.heard.Load())) < t.cfg.ProbeAfter {
				continue
			}
			ps.probing = true
			t.wg.Add(1)
			go t.probe(ps)
		}
		t.mu.Unlock()
	}
}

// probe asks ps for an echo. On success the member is heard; when it times
// out over a connection that is open, that connection is closed.
func (t *Host) probe(ps *peerState) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		ps.probing = false
		t.mu.Unlock()
	}()
	connected := t.h.Network().Connectedness(ps.pid) == network.Connected
	heardBefore := ps.heard.Load()
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.ProbeTimeout)
	defer cancel()
	err := t.echo(ctx, ps)
	if err == nil {
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
	// Anything heard meanwhile (a message on that very connection) shows
	// it is not half-open, only slow: a starved host must not lose its
	// connections on top of its time slices.
	if connected && errors.Is(err, context.DeadlineExceeded) && ps.heard.Load() == heardBefore {
		t.log.Info("peer did not answer a probe over an open connection; closing it as half-open",
			zap.Uint64("member", uint64(ps.id)), zap.Stringer("peer", ps.pid), zap.Duration("timeout", t.cfg.ProbeTimeout))
		_ = t.h.Network().ClosePeer(ps.pid)
		return
	}
	t.log.Debug("probe failed", zap.Uint64("member", uint64(ps.id)), zap.Stringer("peer", ps.pid), zap.Error(err))
}

func (t *Host) echo(ctx context.Context, ps *peerState) error {
	s, err := t.h.NewStream(ctx, ps.pid, protocol.ID(ProbeProtocolID))
	if err != nil {
		return fmt.Errorf("open probe stream: %w", err)
	}
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
	_ = s.CloseWrite()
	if _, err := io.ReadFull(s, in[:]); err != nil {
		_ = s.Reset()
		return t.probeErr(ctx, fmt.Errorf("read probe answer: %w", err))
	}
	_ = s.Close()
	if !bytes.Equal(in[:], out[:]) {
		return errors.New("probe answer does not echo the probe")
	}
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

// handleProbe echoes one probe from a member.
func (t *Host) handleProbe(s network.Stream) {
	t.mu.RLock()
	ps := t.peers[t.byPeer[s.Conn().RemotePeer()]]
	closed := t.closed
	t.mu.RUnlock()
	if ps == nil || closed {
		t.stats.drop(DropUnauthorized)
		_ = s.Reset()
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
