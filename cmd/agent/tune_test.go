package main

import (
	"strings"
	"testing"
)

// TestTuneWaitsForSamples: on a cluster that just started, the leader has
// measured too few gaps for a p99.9, and tune says so, and what to do,
// instead of guessing.
func TestTuneWaitsForSamples(t *testing.T) {
	tc := newTestCluster(t, 2, "majority")
	leader, _ := tc.waitLeader(0)
	code, stdout, stderr := cli(t, "tune", "-socket", tc.socket(leader))
	if code != 1 || stdout != "" {
		t.Fatalf("agent tune on a fresh cluster: exit %d, stdout %q; want exit 1 and nothing on stdout", code, stdout)
	}
	if !strings.Contains(stderr, "heartbeat gaps measured yet") || !strings.Contains(stderr, "run this on the leader after a minute") {
		t.Errorf("agent tune stderr %q: want it to say too few gaps and what to do", stderr)
	}
	code, _, stderr = cli(t, "tune", "-config", "/nonexistent.toml", "-socket", tc.socket(leader))
	if code != 1 || !strings.Contains(stderr, "nonexistent.toml") {
		t.Errorf("agent tune with a missing config: exit %d, stderr %q", code, stderr)
	}
}
