package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTuneTimingsFileIsWhatAgentTuneReads writes the tune part's
// configuration file and hands it to the real `agent tune`: the command
// must get past loading it (to the socket, which is absent) and judge the
// timings written, not the defaults.
func TestTuneTimingsFileIsWhatAgentTuneReads(t *testing.T) {
	o := testOptions(t)
	path, err := writeTimings(filepath.Join(o.work, "tune"), "t.toml", tightTimings)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = runAgentTune(ctx, o.agentBin, filepath.Join(o.work, "absent.sock"), path, 1)
	if err == nil {
		t.Fatal("agent tune succeeded without an agent")
	}
	// A configuration problem stops the command before it dials.
	if !strings.Contains(err.Error(), "no agent socket at") {
		t.Fatalf("agent tune did not get past the bench's configuration file to the socket: %v", err)
	}
}

// TestTuneReportSaysPredictedBesideMeasured renders a synthetic tune
// result and checks one row's figures side by side.
func TestTuneReportSaysPredictedBesideMeasured(t *testing.T) {
	var b strings.Builder
	w := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) }
	res := &tuneResult{Jitter: tuneJitter, N: 3, Pairs: 4, ElectionPairs: 2, Gather: time.Minute, Worst: "n2", Samples: 6000,
		P50Ms: 10.8, P99Ms: 19.2, P999Ms: 88, MaxGapMs: 95,
		Rows: []tuneRow{{Name: "in force (fast profile)", Timings: tightTimings, SuspectAfter: 63 * time.Millisecond, Window: time.Minute,
			PredPhi: 2.4e-6, PredTail: 57, Suspicions: 61, PredElections: 45, PreCampaigns: 20, Elections: 20, LeaderChanges: 4, Load: [2]float64{3.2, 3.4}}}}
	writeTune(w, res, runInfo{})
	want := "| in force (fast profile) | 10 | 20ms | 50ms | 63ms | 1m0s | 2.4e-06 | 57 | 61 | 45 | 20 | 20 | 4 | 3.2 → 3.4 |"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("tune table lacks %q:\n%s", want, b.String())
	}
	if got := countLines([]byte("a member suspected x\nb\nmember suspected\n"), "member suspected"); got != 2 {
		t.Errorf("countLines = %d, want 2", got)
	}
}
