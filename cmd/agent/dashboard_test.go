package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/agent"
	"github.com/conclave-agent/conclave/config"
)

// dashboardPath is the Grafana dashboard in contrib/.
const dashboardPath = "../../contrib/grafana/conclave.json"

// metricRE finds metric names in PromQL: the agent's own and the client
// library's process and Go metrics.
var metricRE = regexp.MustCompile(`\b(?:conclave|process|go)_[a-z0-9_]+\b`)

// dashboardQueries returns every PromQL expression of the dashboard: the
// panels' targets, nested rows included, and the template variables'
// queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Title      string            `json:"title"`
		UID        string            `json:"uid"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: no title or uid", dashboardPath)
	}
	var out []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: a panel: %v", dashboardPath, err)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q queries nothing", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has an empty query", p.Title)
				}
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

// TestDashboardMetricsExist: every metric the Grafana dashboard queries is
// exported by a running agent (scraped over its TCP metrics listener), and
// none of them is deprecated.
func TestDashboardMetricsExist(t *testing.T) {
	queries := dashboardQueries(t)

	// One agent with a health check, so the check metrics exist too.
	dir := t.TempDir()
	c := config.Default()
	c.Node = config.Node{Name: "n1", ID: 1, DataDir: filepath.Join(dir, "n1")}
	c.Gossip.Bind = "127.0.0.1:0"
	c.Gossip.Profile = config.ProfileLocal
	c.Transport.Listen = "/ip4/127.0.0.1/tcp/0"
	c.Election.Voters = []string{"n1"}
	c.API.Socket = filepath.Join(dir, "n1", "agent.sock")
	c.Metrics.Listen = "127.0.0.1:0"
	c.Checks = []config.Check{{Name: "ok", Command: []string{"true"}, Interval: config.Duration(100 * time.Millisecond),
		Timeout: config.Duration(100 * time.Millisecond), Fall: 1, Rise: 1}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, c, agent.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second}
	var exported map[string]string // name → HELP
	eventually(t, 10*time.Second, "the agent leads, with its check run", func() bool {
		resp, err := client.Get("http://" + a.MetricsAddr() + "/metrics")
		if err != nil {
			return false
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false
		}
		exported = map[string]string{}
		for line := range strings.SplitSeq(string(body), "\n") {
			if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
				name, help, _ := strings.Cut(rest, " ")
				exported[name] = help
			}
		}
		return strings.Contains(string(body), "\nconclave_is_leader{election=\"default\"} 1\n") && strings.Contains(string(body), `conclave_check_runs_total{check="ok",result="pass"}`)
	})

	var used []string
	for _, q := range queries {
		for _, name := range metricRE.FindAllString(q, -1) {
			if !slices.Contains(used, name) {
				used = append(used, name)
			}
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d metrics found in the dashboard's queries: %v", len(used), used)
	}
	for _, name := range used {
		help, ok := exported[name]
		if !ok {
			// A histogram's series are NAME_bucket, _sum and _count
			// under the one HELP line of NAME.
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); cut {
					help, ok = exported[base]
				}
			}
		}
		switch {
		case !ok:
			t.Errorf("the dashboard queries %s, which the agent does not export", name)
		case strings.HasPrefix(help, "Deprecated"):
			t.Errorf("the dashboard queries %s, which is deprecated: %s", name, help)
		}
	}
	t.Logf("%d queries use %d metrics, all exported: %s", len(queries), len(used), strings.Join(used, " "))
}
