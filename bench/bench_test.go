package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// testOptions builds the agent once per test binary and returns options
// whose scratch folder is the test's.
func testOptions(t *testing.T) *options {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real agent processes")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cvbt")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, "agent")
		cmd := exec.Command("go", "build", "-o", agentPath, "./cmd/agent")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = err
			t.Logf("%s", out)
		}
	})
	if agentErr != nil {
		t.Fatalf("build agent: %v", agentErr)
	}
	// Sockets live under the scratch folder: keep its path short.
	work, err := os.MkdirTemp("", "cvbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	return &options{repo: repo, work: work, agentBin: agentPath, out: filepath.Join(work, "out")}
}

// TestFailoverAndHandoverOnRealAgents runs one SIGKILL failover and one
// handover on three real agents and checks what the report will say.
func TestFailoverAndHandoverOnRealAgents(t *testing.T) {
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := measureFailover(ctx, o, "majority", fastProfile, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Samples) != 2 || f.Failed != 0 {
		t.Fatalf("failover: %d samples, %d failed; want 2, 0", len(f.Samples), f.Failed)
	}
	for i, d := range f.Samples {
		if d <= 0 || d > electWait {
			t.Errorf("failover trial %d took %v", i, d)
		}
		// A majority election needs at least a vote request and a reply
		// (PreVote doubles it).
		if f.ElectionMsgs[i] < 2 {
			t.Errorf("failover trial %d counted %v election messages, want at least 2", i, f.ElectionMsgs[i])
		}
	}
	h, err := measureHandover(ctx, o, "majority", fastProfile, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Samples) != 2 || len(h.WatchLatency) != 2 {
		t.Fatalf("handover: %d samples, %d watch latencies; want 2 each", len(h.Samples), len(h.WatchLatency))
	}
	for i := range h.Samples {
		// The resigning agent stops leading before anyone else can lead.
		if h.WatchLatency[i] > h.Samples[i] {
			t.Errorf("handover trial %d: watch latency %v exceeds the handover %v", i, h.WatchLatency[i], h.Samples[i])
		}
	}
}

// TestSteadyUnderJitterAndStatusLoad watches a small jittered cluster and
// sends status requests, checking the counts the report relies on.
func TestSteadyUnderJitterAndStatusLoad(t *testing.T) {
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jit := jitterOptions{Max: 5 * time.Millisecond}
	s, err := measureSteady(ctx, o, "majority", defaultProfile, 3, &jit, 3*time.Second, "test")
	if err != nil {
		t.Fatal(err)
	}
	if s.Error != "" {
		t.Fatalf("cluster did not form: %s", s.Error)
	}
	if s.Bytes == 0 {
		t.Error("no election traffic crossed the jitter proxies: transport.advertise is not in effect")
	}
	if len(s.CPU) != 3 || len(s.RSSMB) != 3 || s.Roles[0] != "leader" {
		t.Fatalf("cost samples: cpu %v rss %v roles %v", s.CPU, s.RSSMB, s.Roles)
	}
	for i := range s.CPU {
		if !(s.CPU[i] > 0) || !(s.RSSMB[i] > 1) {
			t.Errorf("agent %d: cpu %v rss %v MB: a live agent uses some", i, s.CPU[i], s.RSSMB[i])
		}
	}
	lat, err := measureStatusLatency(ctx, o, []int{200}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 2 {
		t.Fatalf("latency: %d results, want leader and follower", len(lat))
	}
	for _, l := range lat {
		if l.Sent != 200 || l.Errors != 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
			t.Errorf("latency %s: %+v", l.Target, l)
		}
	}
}

// TestReportRendersEveryPart renders a report from synthetic results and
// checks that targets are judged from them.
func TestReportRendersEveryPart(t *testing.T) {
	dir := t.TempDir()
	msd := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	res := &results{
		Runs:     map[string]runInfo{"failover": {At: time.Now(), Command: "bash scripts/bench"}},
		Failover: []failoverResult{{Protocol: "majority", Profile: "default", N: 5, Samples: msd(200, 250, 700), ElectionMsgs: []float64{16, 16, 20}}},
		Handover: []handoverResult{{Protocol: "majority", Profile: "default", N: 5, Samples: msd(5, 6, 7)}},
		Etcd:     []etcdResult{{Label: "etcd election, session TTL 2 s", TTL: 2 * time.Second, Samples: msd(1800, 1900)}},
		Latency:  []latencyResult{{Rate: 5000, Target: "leader", P99: 2 * time.Millisecond, ServiceP99: 800 * time.Microsecond}},
		Floor: &floorResult{Window: 15 * time.Second, Windows: 3, Rows: []floorRow{
			{Name: "majority leader", Agent: "a", Floor: "f", AgentCPU: []float64{0.03, 0.02, 0.026}, FloorCPU: []float64{0.02, 0.02, 0.02}, Target: 1.3},
			{Name: "observers (median of 2)", Agent: "a", Floor: "f", AgentCPU: []float64{0.004, 0.004, 0.004}, FloorCPU: []float64{0.004, 0.004, 0.004}, Target: 1.2},
		}},
	}
	if err := writeReport(dir, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"| majority failover median | ≤ 300 ms | 250 ms | yes |",
		"| majority failover worst | ≤ 600 ms | 700 ms | no |",
		"| majority handover (`agent resign`) median | ≤ 20 ms | 6.00 ms | yes |",
		"| 7.2× |", // etcd median 1800 (nearest rank) ÷ 250
		"failover.svg",
		"| `/v1/status` p99 at 5,000/s (leader) | ≤ 1 ms | 0.80 ms service, 0 starved (2.00 ms from schedule) | yes |",
		"| majority leader | a | f | 2.60 % | 2.00 % | 1.30× | 1.50, 1.00, 1.30 | ≤ 1.3× | yes |",
		"| observers (median of 2) | a | f | 0.40 % | 0.40 % | 1.00× | 1.00, 1.00, 1.00 | ≤ 1.2× | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "failover.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(svg), "<circle"); got != 5 {
		t.Errorf("plot has %d dots, want one per sample (5)", got)
	}
}

func TestMergeByKeyKeepsOtherSeries(t *testing.T) {
	old := []failoverResult{{Protocol: "majority", Profile: "default", N: 5, Failed: 1}, {Protocol: "ring", Profile: "default", N: 5, Failed: 2}}
	fresh := []failoverResult{{Protocol: "ring", Profile: "default", N: 5, Failed: 3}, {Protocol: "ring", Profile: "fast", N: 5, Failed: 4}}
	got := mergeByKey(old, fresh, func(f failoverResult) string { return fmt.Sprint(f.Protocol, f.Profile, f.N) })
	var failed []int
	for _, f := range got {
		failed = append(failed, f.Failed)
	}
	if !slices.Equal(failed, []int{1, 3, 4}) {
		t.Fatalf("merged series (by their Failed marks) = %v, want [1 3 4]", failed)
	}
	if old[1].Failed != 2 {
		t.Fatal("mergeByKey changed its input")
	}
}

// TestIdleTargetsReadDefaultsAndFrugal checks that the idle RSS targets
// are read at the defaults and at the frugal profile, each row named for
// its settings, that the fast profile is not held to them, and that no
// absolute CPU target is left (the floor part judges CPU as a ratio).
func TestIdleTargetsReadDefaultsAndFrugal(t *testing.T) {
	row := func(profile string, leader, follower, rss float64) steadyResult {
		return steadyResult{Protocol: "majority", Profile: profile, N: 5, Running: 5,
			CPU: []float64{leader, follower, follower, follower, follower}, RSSMB: []float64{22, 22, rss, 22, 22}}
	}
	res := &results{Cost: []steadyResult{row("default", 0.021, 0.008, 22), row("fast", 0.06, 0.03, 50), row("frugal", 0.0067, 0.003, 41)}}
	got := map[string]bool{}
	for _, tg := range evaluateTargets(res) {
		if strings.HasPrefix(tg.What, "idle ") {
			got[tg.What] = tg.Met
		}
		if strings.Contains(tg.What, "CPU") {
			t.Errorf("target %q: CPU is judged against its floor, not in absolute terms", tg.What)
		}
	}
	want := map[string]bool{
		"idle majority agent RSS (5 agents, worst of 5)":                 true,
		"idle majority agent RSS (5 agents, frugal profile, worst of 5)": false,
	}
	if len(got) != len(want) {
		t.Errorf("idle targets %v, want %v", got, want)
	}
	for what, met := range want {
		if m, ok := got[what]; !ok || m != met {
			t.Errorf("target %q: met=%v present=%v, want met=%v", what, m, ok, met)
		}
	}
}
