package membership

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/internal/ratelog"
)

// 300 forged UDP packets used to give 300 ERROR lines: now one line per
// kind of problem, and every one is counted.
func TestRemoteProblemsRateLimited(t *testing.T) {
	prev := remoteLogs.Swap(ratelog.NewSet(remoteLogEvery))
	t.Cleanup(func() { remoteLogs.Store(prev) })
	core, logs := observer.New(zapcore.InfoLevel)
	lg := newStdLogger(&zapWriter{log: zap.New(core)})
	before := ProblemLines()
	for i := range 300 {
		lg.Printf("[ERR] memberlist: Failed to decode ping request: msgpack decode error [pos %d]: bad from=10.0.0.%d:7946", i, i%250)
		lg.Printf("[WARN] memberlist: Got ping for unexpected node 'x%d' from=10.0.0.1:7946", i)
	}
	lg.Printf("[INFO] memberlist: info is not limited")
	lg.Printf("[INFO] memberlist: info is not limited")
	if n := logs.Len(); n != 4 {
		t.Fatalf("600 problem lines and 2 info lines gave %d log lines, want 2 + 2", n)
	}
	// Other tests' clusters may add their own lines meanwhile.
	if got := ProblemLines() - before; got < 600 {
		t.Fatalf("ProblemLines rose by %d, want at least 600", got)
	}
}

func TestLogKey(t *testing.T) {
	for line, want := range map[string]string{
		"Failed to decode ping request: msgpack":          "Failed to decode ping request",
		"Got ping for unexpected node 'x' from=1.2.3.4:5": "Got ping for unexpected node",
		strings.Repeat("a", 70):                           strings.Repeat("a", 64),
		"12 bad packets":                                  "",
	} {
		if got := logKey([]byte(line)); got != want {
			t.Errorf("logKey(%q) = %q, want %q", line, got, want)
		}
	}
}
