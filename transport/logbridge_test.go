package transport

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/internal/ratelog"
)

// freshRemoteLogs gives the test its own rate limits (they are
// process-wide).
func freshRemoteLogs(t testing.TB) {
	prev := remoteLogs.Swap(ratelog.NewSet(remoteLogEvery))
	t.Cleanup(func() { remoteLogs.Store(prev) })
}

func TestSlogBridgeForwardsToZap(t *testing.T) {
	freshRemoteLogs(t)
	core, logs := observer.New(zap.DebugLevel)
	prev := bridgeLogger.Load()
	t.Cleanup(func() {
		if prev != nil {
			bridgeLogger.Store(prev)
		}
	})
	SetLibp2pLogger(zap.New(core))
	l := slog.New(&zapHandler{}).With("logger", "swarm").WithGroup("conn")
	l.Debug("hidden")
	l.Warn("dial failed", "peer", "p1", slog.Group("addr", "ip", "127.0.0.1"))
	l.Debug("accept upgrade error", "err", "boom")
	// Our own gater's refusal is not a key mismatch: the gater logged it
	// with the right reason, the key hint would mislead.
	l.Debug("accept upgrade error", "err", errors.New("gater rejected connection with peer 12D3KooWX and addr /ip4/127.0.0.1/tcp/1 with direction 1"))
	// Nor is a remote that hung up halfway, as a peer stopping while it
	// dialled does: a clean stop of the cluster must log nothing.
	l.Debug("accept upgrade error", "err", errors.New("failed to negotiate security protocol: read tcp4 127.0.0.1:41039->127.0.0.1:44654: read: connection reset by peer"))
	l.Debug("accept upgrade error", "err", errors.New("failed to negotiate security protocol: EOF"))
	if !l.Handler().Enabled(context.Background(), slog.LevelWarn) {
		t.Error("warn disabled on a debug logger")
	}
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("got %d entries: %v", len(all), all)
	}
	e := all[0]
	if e.Level != zapcore.WarnLevel || e.Message != "dial failed" || e.LoggerName != "libp2p" {
		t.Fatalf("entry %+v", e)
	}
	ctx := e.ContextMap()
	if ctx["logger"] != "swarm" || ctx["conn.peer"] != "p1" || ctx["conn.addr.ip"] != "127.0.0.1" {
		t.Fatalf("fields %v", ctx)
	}
	// The one debug message that explains a refused handshake is raised.
	p := all[1]
	if p.Level != zapcore.WarnLevel || p.Message != "accept upgrade error" || p.ContextMap()["hint"] == nil {
		t.Fatalf("promoted entry %+v", p)
	}
}

// 300 connections that fail the handshake (stray TCP, a wrong cluster key)
// used to give 300 WARN lines; now one, and the counter has all 300.
func TestBridgeRateLimitsRemoteWarnings(t *testing.T) {
	freshRemoteLogs(t)
	core, logs := observer.New(zap.DebugLevel)
	prev := bridgeLogger.Load()
	t.Cleanup(func() {
		if prev != nil {
			bridgeLogger.Store(prev)
		}
	})
	SetLibp2pLogger(zap.New(core))
	l := slog.New(&zapHandler{})
	before := HandshakeFailures()
	for range 300 {
		l.Debug("accept upgrade error", "err", "failed to negotiate security protocol")
		l.Warn("some libp2p warning", "remote", "1.2.3.4")
	}
	if n := logs.Len(); n != 2 {
		t.Fatalf("300 failed handshakes and 300 warnings gave %d log lines, want 2", n)
	}
	if got := HandshakeFailures() - before; got != 300 {
		t.Fatalf("HandshakeFailures rose by %d, want 300", got)
	}
}
