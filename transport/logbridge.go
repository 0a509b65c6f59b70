package transport

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/gologshim"

	"github.com/conclave-agent/conclave/internal/ratelog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// libp2p logs through log/slog via gologshim, whose handler is process-wide
// and bound by each libp2p logger on its first use. So one bridge is
// installed once, before the first host starts, and forwards to whichever
// zap logger was set last.
var (
	bridgeOnce   sync.Once
	bridgeLogger atomic.Pointer[zap.Logger]
)

// remoteLogEvery is how often one warning that a remote sender can trigger
// (a failed handshake, a refused peer, a bad frame, any libp2p warning) is
// logged: 300 stray TCP connections used to give 300 WARN lines. The events
// are counted instead, in the transport's drop counters and in
// HandshakeFailures.
const remoteLogEvery = 10 * time.Second

// remoteLogs limits those warnings per message, process-wide (the libp2p
// bridge is process-wide too).
var remoteLogs atomic.Pointer[ratelog.Set]

func init() { remoteLogs.Store(ratelog.NewSet(remoteLogEvery)) }

// handshakeFailures counts inbound connections that failed libp2p's
// handshake: a wrong cluster key, or not a conclave node at all.
var handshakeFailures atomic.Uint64

// HandshakeFailures returns how many inbound connections have failed the
// handshake in this process (all hosts together).
func HandshakeFailures() uint64 { return handshakeFailures.Load() }

// warnLimited logs a warning an outside sender can trigger, at most once per
// remoteLogEvery for the same msg, saying how many were left out.
func warnLimited(log *zap.Logger, msg string, fields ...zap.Field) {
	ok, suppressed := remoteLogs.Load().Allow(msg, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed_since_last", suppressed))
	}
	log.Warn(msg, fields...)
}

// SetLibp2pLogger routes libp2p's own logs to l (named "libp2p"). It is
// process-wide: with several hosts in one process, the last call wins. New
// calls it with Config.Logger.
func SetLibp2pLogger(l *zap.Logger) {
	bridgeLogger.Store(l.Named("libp2p"))
	bridgeOnce.Do(func() { gologshim.SetDefaultHandler(&zapHandler{}) })
}

// zapHandler is a slog.Handler that writes to the current bridge logger.
type zapHandler struct {
	attrs  []zap.Field
	prefix string // open slog groups, "a.b."
}

func (h *zapHandler) logger() *zap.Logger {
	if l := bridgeLogger.Load(); l != nil {
		return l
	}
	return zap.NewNop()
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	case l >= slog.LevelInfo:
		return zapcore.InfoLevel
	default:
		return zapcore.DebugLevel
	}
}

// promoted are libp2p debug messages an operator needs to see: they are
// the only trace, on the accepting side, of a peer that failed the
// handshake. They are raised to warnings with a hint.
var promoted = map[string]string{
	"accept upgrade error": "an inbound connection failed its handshake: the remote most likely has a different cluster key (gossip.key) or is not a conclave node",
}

// Enabled implements slog.Handler. libp2p's own debug output (dependency
// injection traces, every dial step) would drown ours, so it is dropped,
// except the few promoted messages.
func (h *zapHandler) Enabled(_ context.Context, l slog.Level) bool {
	if l < slog.LevelInfo {
		return h.logger().Core().Enabled(zapcore.WarnLevel)
	}
	return h.logger().Core().Enabled(zapLevel(l))
}

// Handle implements slog.Handler.
func (h *zapHandler) Handle(_ context.Context, r slog.Record) error {
	lvl := zapLevel(r.Level)
	hint, promote := promoted[r.Message]
	if r.Level < slog.LevelInfo {
		if !promote || refusedByGater(r) || remoteHungUp(r) {
			return nil
		}
		lvl = zapcore.WarnLevel
	}
	if promote {
		handshakeFailures.Add(1)
	}
	var suppressed uint64
	if lvl >= zapcore.WarnLevel {
		// Most of libp2p's warnings answer what a remote did.
		var ok bool
		if ok, suppressed = remoteLogs.Load().Allow(r.Message, time.Now()); !ok {
			return nil
		}
	}
	ce := h.logger().Check(lvl, r.Message)
	if ce == nil {
		return nil
	}
	fields := make([]zap.Field, 0, len(h.attrs)+r.NumAttrs()+2)
	fields = append(fields, h.attrs...)
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed_since_last", suppressed))
	}
	if promote {
		fields = append(fields, zap.String("hint", hint))
	}
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.prefix, a)
		return true
	})
	ce.Write(fields...)
	return nil
}

// refusedByGater reports a failed upgrade that our own gater caused: the
// gater has logged the refusal with the right reason (not a member), and
// the promoted hint, which blames the cluster key, would be wrong. A
// restarted agent that did not know its members yet logged that the remote
// "most likely has a different cluster key" every ten seconds.
// remoteHungUp reports an upgrade that failed because the remote closed
// the connection in the middle (a peer stopping while it dialled): not a
// key mismatch, and no news during a clean stop of the cluster.
func remoteHungUp(r slog.Record) bool {
	hung := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			s := a.Value.String()
			hung = strings.Contains(s, "connection reset by peer") || strings.HasSuffix(s, ": EOF") || s == "EOF" ||
				strings.Contains(s, "broken pipe")
		}
		return !hung
	})
	return hung
}

func refusedByGater(r slog.Record) bool {
	refused := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), "gater rejected") {
			refused = true
		}
		return !refused
	})
	return refused
}

func appendAttr(fields []zap.Field, prefix string, a slog.Attr) []zap.Field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			fields = appendAttr(fields, p, g)
		}
		return fields
	}
	if a.Key == "" {
		return fields
	}
	return append(fields, zap.Any(prefix+a.Key, v.Any()))
}

// WithAttrs implements slog.Handler.
func (h *zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &zapHandler{prefix: h.prefix, attrs: append([]zap.Field(nil), h.attrs...)}
	for _, a := range attrs {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return n
}

// WithGroup implements slog.Handler.
func (h *zapHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &zapHandler{prefix: h.prefix + name + ".", attrs: h.attrs}
}
