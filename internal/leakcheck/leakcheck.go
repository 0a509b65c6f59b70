// Package leakcheck is goleak for packages that run real memberlist nodes:
// it fails a test binary whose goroutines outlive its tests, but waits a
// few seconds first, because memberlist's probeNode and per-connection
// handlers outlive Shutdown by up to one probe interval or TCP timeout. It
// is for tests only and must never be imported by non-test code.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long leftover goroutines get to end by themselves.
const Patience = 5 * time.Second

// Main runs the tests and, if they passed, the patient leak check, then
// exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Wait(Patience); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Wait returns nil as soon as no unexpected goroutine is left, or goleak's
// report once patience runs out.
func Wait(patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
