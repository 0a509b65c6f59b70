package membership

import (
	"bytes"
	"log"
	"regexp"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
}

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
	if w.onSuspect != nil {
		if m := suspectLine.FindSubmatch(line); m != nil {
			w.onSuspect(string(m[1]))
		}
	}
	if ce := w.log.Check(level, string(line)); ce != nil {
		ce.Write()
	}
	return n, nil
}
