package membership

import (
	"bytes"
	"log"
	"regexp"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/conclave-agent/conclave/internal/ratelog"
)

// zapWriter turns memberlist's log lines ("[DEBUG] memberlist: …") into zap
// entries at the matching level, so that memberlist never writes to stderr
// and its debug chatter is filtered by the agent's log level.
type zapWriter struct {
	log *zap.Logger
	// onSuspect is called with a node's name when this node's own probe of
	// it failed. Memberlist has no callback for that; this log line is the
	// only way it reports it.
	onSuspect func(name string)
	// closing, when not nil and set, says that this node is shutting
	// down: memberlist's probes and acks still in flight then fail on the
	// sockets its Shutdown closed ("use of closed network connection"),
	// which is the expected end of a clean stop, not a fault.
	closing *atomic.Bool
}

// closedConn is the text of net.ErrClosed.
var closedConn = []byte("use of closed network connection")

var levelPrefixes = []struct {
	prefix []byte
	level  zapcore.Level
}{
	{[]byte("[DEBUG] "), zapcore.DebugLevel},
	{[]byte("[INFO] "), zapcore.InfoLevel},
	{[]byte("[WARN] "), zapcore.WarnLevel},
	{[]byte("[ERR] "), zapcore.ErrorLevel},
	{[]byte("[ERROR] "), zapcore.ErrorLevel},
}

var suspectLine = regexp.MustCompile(`^Suspect (.+) has failed, no acks received$`)

// remoteLogEvery is how often one kind of memberlist warning or error is
// logged. Most answer a packet or connection from outside, whose source a
// UDP sender can forge: 300 stray packets used to give 300 ERROR lines.
const remoteLogEvery = 10 * time.Second

// problemLines counts memberlist's warnings and errors, logged or not, in
// this process (every cluster together).
var problemLines atomic.Uint64

// ProblemLines returns how many warnings and errors memberlist has reported
// in this process, including those the rate limit kept out of the log.
func ProblemLines() uint64 { return problemLines.Load() }

var remoteLogs atomic.Pointer[ratelog.Set]

func init() { remoteLogs.Store(ratelog.NewSet(remoteLogEvery)) }

// logKey is what identifies a kind of line for the rate limit: its fixed
// text, up to the first detail memberlist fills in — a quoted name, a
// number, an address, ": " before an error — at most 64 bytes. A sender
// varying the details (forged names, ports) still hits one limiter.
func logKey(line []byte) string {
	end := min(len(line), 64)
	for i, c := range line[:end] {
		if c == '\'' || c == '"' || c == '[' || c == '=' || (c >= '0' && c <= '9') || (c == ':' && i+1 < len(line) && line[i+1] == ' ') {
			end = i
			break
		}
	}
	return string(bytes.TrimRight(line[:end], " "))
}

func newStdLogger(w *zapWriter) *log.Logger { return log.New(w, "", 0) }

// Write handles one log line; log.Logger calls it once per line.
func (w *zapWriter) Write(p []byte) (int, error) {
	n := len(p)
	line := bytes.TrimRight(p, "\n")
	level := zapcore.InfoLevel
	for _, lp := range levelPrefixes {
		if bytes.HasPrefix(line, lp.prefix) {
			level, line = lp.level, line[len(lp.prefix):]
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	if level >= zapcore.WarnLevel && w.closing != nil && w.closing.Load() && bytes.Contains(line, closedConn) {
		level = zapcore.DebugLevel
	}
	if w.onSuspect != nil {
		if m := suspectLine.FindSubmatch(line); m != nil {
			w.onSuspect(string(m[1]))
		}
	}
	var fields []zap.Field
	if level >= zapcore.WarnLevel {
		problemLines.Add(1)
		ok, suppressed := remoteLogs.Load().Allow(logKey(line), time.Now())
		if !ok {
			return n, nil
		}
		if suppressed > 0 {
			fields = append(fields, zap.Uint64("suppressed_since_last", suppressed))
		}
	}
	if ce := w.log.Check(level, string(line)); ce != nil {
		ce.Write(fields...)
	}
	return n, nil
}
