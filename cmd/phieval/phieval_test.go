package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/phi"
)

// The detector's acceptance check: at the default threshold and heartbeat
// interval, a full simulated day of heartbeats with 20 ms jitter (scenario
// a) raises no false suspicion, and every crashed sender is suspected in
// under a second. The whole day is simulated: the detector is O(1) per
// heartbeat, so 864 000 heartbeats take well under a second without -race.
func TestDefaultsSurviveADayOfJitterAndDetectCrashesFast(t *testing.T) {
	length := 24 * time.Hour
	if testing.Short() {
		length = 2 * time.Hour
	}
	cands := []candidate{
		phiCandidate(familyDefault, phi.DefaultConfig()),
		// The control: a timeout twice the interval on the same
		// network must suspect falsely, or the harness could not see
		// a false suspicion at all.
		fixedCandidate(2 * phi.DefaultHeartbeatInterval),
	}
	res := simulate(scenarios[0], cands, phi.DefaultHeartbeatInterval, length, crashEvery, 42)
	def, control := res[0], res[1]
	if def.falses != 0 {
		t.Errorf("defaults: %d false suspicions in %v of 20 ms jitter, want 0", def.falses, length)
	}
	if control.falses == 0 {
		t.Errorf("control (fixed %v timeout) never suspected falsely: the simulation cannot detect false suspicions", 2*phi.DefaultHeartbeatInterval)
	}
	if len(def.detections) < 100 {
		t.Fatalf("only %d crash trials", len(def.detections))
	}
	if worst := def.quantile(1); worst >= time.Second || worst <= 0 {
		t.Errorf("defaults: slowest crash detection %v, want in (0, 1s)", worst)
	}
	t.Logf("defaults over %v: mean detection %v, p99 %v, max %v; control false suspicions %d",
		length, def.meanDetection(), def.quantile(0.99), def.quantile(1), control.falses)
}

func TestSimulationIsDeterministic(t *testing.T) {
	run := func() []result {
		return simulate(scenarios[1], candidates(), phi.DefaultHeartbeatInterval, 30*time.Minute, 10, 7)
	}
	a, b := run(), run()
	for i := range a {
		if a[i].falses != b[i].falses || a[i].pauseSusp != b[i].pauseSusp || a[i].meanDetection() != b[i].meanDetection() {
			t.Fatalf("%s %s: runs differ: %+v vs %+v", a[i].cand.family, a[i].cand.label, a[i], b[i])
		}
	}
}

func TestPausesAreCountedApart(t *testing.T) {
	// In scenario (b) a 1 s timeout never trips on jitter alone, so
	// anything the pauses cause must land in pauseSusp; and a 400 ms
	// timeout must be tripped by some of the pauses (up to 1 s long).
	res := simulate(scenarios[1], []candidate{fixedCandidate(1000 * time.Millisecond)}, phi.DefaultHeartbeatInterval, 12*time.Hour, 0, 3)
	if res[0].falses != 0 {
		t.Errorf("1 s timeout suspected a running sender %d times under 20 ms jitter", res[0].falses)
	}
	res = simulate(scenarios[1], []candidate{fixedCandidate(400 * time.Millisecond)}, phi.DefaultHeartbeatInterval, 12*time.Hour, 0, 3)
	if res[0].pauseSusp == 0 {
		t.Error("400 ms timeout never tripped by pauses of up to 1 s")
	}
}

func TestRunWritesTablesAndPlot(t *testing.T) {
	var out bytes.Buffer
	svg := t.TempDir() + "/p.svg"
	if err := run(&out, 0.01, 1, svg, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### (a)", "### (b)", "### (c)", "| fixed timeout | 500ms |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") || strings.Count(s, "<polyline") != 3*3 {
		t.Errorf("plot is not three panels of three curves:\n%.300s", s)
	}
}
