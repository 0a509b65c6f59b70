package membership

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestDuplicateNameRefusedLoudly: a second node under a name a live node
// holds is kept out by memberlist; the holder says so at ERROR, naming both
// addresses.
func TestDuplicateNameRefusedLoudly(t *testing.T) {
	n1 := start(t, testConfig("n1", 1))
	imposter := start(t, testConfig("n1", 9, n1.LocalAddr()))
	e := waitLog(t, n1.logs, "a name conflict logged", func(e observer.LoggedEntry) bool {
		return e.Level == zapcore.ErrorLevel && strings.Contains(e.Message, "claims a name")
	})
	fields := fmt.Sprint(e.ContextMap())
	for _, want := range []string{n1.LocalAddr(), imposter.LocalAddr()} {
		if !strings.Contains(fields, want) {
			t.Errorf("conflict log does not name %s: %s", want, fields)
		}
	}
	for _, m := range n1.Members() {
		if m.ID == 9 {
			t.Errorf("the imposter was admitted: %+v", m)
		}
	}
}
