package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

// With [metrics] listen set, a real agent serves /metrics (with the
// etcd-style names) and /v1/health over TCP, and nothing else: a resign
// attempt on that port is refused without reaching the agent, which keeps
// leading.
func TestMetricsOverTCP(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	tc.cfgs[0].Metrics.Listen = "127.0.0.1:0"
	tc.startAll()
	tc.waitAgreed(0, 10*time.Second)
	base := "http://" + tc.agents[0].MetricsAddr()
	if base == "http://" {
		t.Fatal("MetricsAddr is empty with metrics.listen set")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	do := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the body: %v", method, path, err)
		}
		return resp.StatusCode, string(body)
	}

	code, body := do(http.MethodGet, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, want := range []string{
		"\nconclave_has_leader{election=\"default\"} 1\n",
		"\nconclave_is_leader{election=\"default\"} 1\n",
		"\nconclave_leader_changes_seen_total{election=\"default\"} ",
		"# HELP conclave_leader_changes_total Deprecated: use conclave_leader_changes_seen_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	if code, body := do(http.MethodGet, "/v1/health"); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("GET /v1/health: %d %s", code, body)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/v1/resign", http.StatusNotFound},
		{http.MethodGet, "/v1/resign", http.StatusNotFound},
		{http.MethodPost, "/v1/maint", http.StatusNotFound},
		{http.MethodPost, "/v1/voters", http.StatusNotFound},
		{http.MethodGet, "/v1/status", http.StatusNotFound},
		{http.MethodGet, "/v1/watch", http.StatusNotFound},
		{http.MethodPost, "/v1/health", http.StatusMethodNotAllowed},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
	} {
		if code, body := do(c.method, c.path); code != c.want {
			t.Errorf("%s %s over TCP: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
	}
	st, err := tc.status(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Role != api.RoleLeader {
		t.Errorf("after the refused resign: role %q, want leader", st.Role)
	}
}

// Off by default: no TCP listener.
func TestMetricsListenerOffByDefault(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolMajority, "")
	tc.startAll()
	if addr := tc.agents[0].MetricsAddr(); addr != "" {
		t.Errorf("MetricsAddr = %q with metrics.listen unset", addr)
	}
}
