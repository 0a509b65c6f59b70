package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// metricsSample is the shape of an agent's GET /metrics: the Go and
// process collectors beside conclave's own series.
const metricsSample = `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds_count 12
# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 37
# HELP go_threads Number of OS threads created.
# TYPE go_threads gauge
go_threads 9
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 21
conclave_messages_sent_total{election="default",kind="Heartbeat"} 1.234e+06
`

func TestGoroutinesFromMetricsText(t *testing.T) {
	m, err := parseMetrics(bufio.NewScanner(strings.NewReader(metricsSample)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := goroutinesOf(m, "n1")
	if err != nil || g != 37 {
		t.Fatalf("goroutines = %v, %v; want 37", g, err)
	}
	delete(m, "go_goroutines")
	if _, err := goroutinesOf(m, "n1"); err == nil || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("without go_goroutines: err = %v, want one naming n1", err)
	}
}

func TestOpenFilesCountsDescriptors(t *testing.T) {
	before, err := openFiles(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	during, err := openFiles(os.Getpid())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Another goroutine of the test binary may open or close a file in
	// between, but not exactly one less than ours.
	if during != before+1 {
		t.Fatalf("open files went from %d to %d on opening one", before, during)
	}
	if _, err := openFiles(-1); err == nil {
		t.Fatal("open files of pid -1: no error")
	}
}

func TestSpreadOfNamesAVoterWorst(t *testing.T) {
	if spreadOf(nil) != nil {
		t.Fatal("spread of nothing is not nil")
	}
	s := spreadOf([]agentValue{
		{Agent: "n1", Value: 40}, {Agent: "n2", Value: 12},
		{Agent: "n3", Observer: true, Value: 10}, {Agent: "n4", Observer: true, Value: 14}, {Agent: "n5", Observer: true, Value: 11},
	})
	want := agentSpread{Median: 12, Max: 40, MaxAgent: "n1", MaxIsVoter: true, MedianObserver: 11, MaxObserver: 14, Read: 5}
	if *s != want {
		t.Fatalf("spread = %+v, want %+v", *s, want)
	}
	if got := spreadWorst(s, count); got != "40 (n1, a voter; observers ≤ 14)" {
		t.Errorf("worst cell = %q", got)
	}
	s = spreadOf([]agentValue{{Agent: "n1", Value: 9}, {Agent: "n4", Observer: true, Value: 15}})
	if s.MaxAgent != "n4" || s.MaxIsVoter || spreadWorst(s, count) != "15" {
		t.Errorf("observer worst: %+v, cell %q", *s, spreadWorst(s, count))
	}
}

// oldFleetJSON is a fleet row as results.json held it before open files
// and goroutines were measured.
const oldFleetJSON = `{"runs": {}, "fleet": [{"n": 100, "voters": 3, "agree_after_start_ns": 387873597, "window_ns": 20000000000,
 "leader_cpu": 0.0284, "median_cpu": 0.0045, "max_cpu": 0.0284, "median_observer_cpu": 0.0045,
 "median_rss_mb": 24.4, "max_rss_mb": 32.5, "running": 100, "voters_agree_ns": [230112587], "all_agree_ns": [1067519883],
 "epoch_reach_ns": [837407296], "failed": 0, "loadavg_1m_before_after": [0.43, 1.6], "start_gap_ns": 100000000}]}`

// TestFleetAgentTableAndRatio renders the per-agent table from an older
// results.json plus new rows, and checks the ratio rows and the target.
func TestFleetAgentTableAndRatio(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, []byte(oldFleetJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := loadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fleet) != 1 || res.Fleet[0].OpenFiles != nil || res.Fleet[0].Goroutines != nil || res.Fleet[0].MedianRSSMB != 24.4 {
		t.Fatalf("old fleet row loaded as %+v", res.Fleet)
	}
	row := func(n int, flags []string, cpu, rss, files, gor float64) fleetResult {
		return fleetResult{N: n, Voters: 3, Flags: flags, Running: n, MedianCPU: 0.005, MaxCPU: 0.02, MedianRSSMB: rss, MaxRSSMB: rss + 8,
			ExactCPU:   &agentSpread{Median: cpu, Max: 3 * cpu, MaxAgent: "n1", MaxIsVoter: true, MaxObserver: 2 * cpu},
			OpenFiles:  &agentSpread{Median: files, Max: files + float64(n), MaxAgent: "n2", MaxIsVoter: true, MaxObserver: files + 2},
			Goroutines: &agentSpread{Median: gor, Max: gor + 1, MaxAgent: "n9"}}
	}
	res.Fleet = append(res.Fleet,
		row(250, nil, 0.0046, 30, 24, 50),
		row(25, nil, 0.0045, 25, 20, 48),
		row(250, []string{"-gossip.profile=wan"}, 0.0045, 29, 22, 40),
		fleetResult{N: 500, Voters: 3, Error: "no agreement"})
	if err := writeReport(dir, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		// The old row: CPU and RSS, nothing for what it did not measure.
		"| 100 | 3 | defaults | 0.45 % (ticks) | 2.84 % (ticks) | 24.4 MB | 32.5 MB | — | — | — | — |",
		"| 25 | 3 | defaults | 0.45 % | 1.35 % (n1, a voter; observers ≤ 0.90 %) | 25.0 MB | 33.0 MB | 20 | 45 (n2, a voter; observers ≤ 22) | 48 | 49 |",
		"| 500 | 3 | defaults | did not agree |",
		// 250 ÷ 25 at the defaults: CPU 1.02 (exact; the ticks say 1.00), RSS 1.20 (at the goal), open
		// files 1.20, goroutines 1.04. The 100 and the failed 500 lie
		// between or do not count; the wan row has no partner.
		"| **250 ÷ 25** | 3 | defaults | 1.02× yes | | 1.20× yes | | 1.20× yes | | 1.04× yes | |",
		"| fleet of 250 ÷ fleet of 25 (3 voters): per-agent median of CPU, RSS, open files, goroutines | each ≤ 1.2× | 1.02× yes, 1.20× yes, 1.20× yes, 1.04× yes | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Count(md, "÷ 25** |") != 1 || strings.Contains(md, "250 ÷ 250") {
		t.Error("a ratio row for a setting with a single size")
	}

	// Without exact CPU on one side the ratio falls back to the ticks.
	exact := res.Fleet[2].ExactCPU
	res.Fleet[2].ExactCPU = nil
	if got := (fleetRatio{Small: res.Fleet[2], Big: res.Fleet[1]}).Medians()[0]; got != 1 {
		t.Errorf("CPU ratio without exact CPU on the small fleet = %v, want the ticks' 1", got)
	}
	res.Fleet[2].ExactCPU = exact

	// A median over the goal fails the row and the target.
	res.Fleet[1].Goroutines.Median = 60
	if err := writeReport(dir, res); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "README.md"))
	for _, want := range []string{"| 1.25× no | |", "1.25× no | no |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report with goroutines 60 ÷ 48 lacks %q", want)
		}
	}
}

// TestTallyNamesTheLaggards checks the fleet's progress line: groups by
// what each agent last said, largest first, naming the members of the
// small groups only, and counting agents that never started as down.
func TestTallyNamesTheLaggards(t *testing.T) {
	c := &cluster{}
	say := func(name string, st agentStatus) {
		done := make(chan struct{})
		a := &agentProc{name: name, done: done, watched: true, last: observation{at: time.Now(), st: st}}
		c.agents = append(c.agents, a)
	}
	for i := 0; i < 20; i++ {
		say(fmt.Sprintf("o%d", i), agentStatus{Role: "observer", Leader: "n1", Epoch: 2})
	}
	say("n1", agentStatus{Role: "leader", Leader: "n1", Epoch: 2})
	say("late", agentStatus{Role: "observer", Leader: "n2", Epoch: 1})
	c.agents = append(c.agents, &agentProc{name: "never"})
	got := c.tally()
	want := `20 observer leader="n1" epoch=2; 1 down (never); 1 leader leader="n1" epoch=2 (n1); 1 observer leader="n2" epoch=1 (late)`
	if got != want {
		t.Fatalf("tally:\n got %s\nwant %s", got, want)
	}
}
