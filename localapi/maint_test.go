package localapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
)

// maintBackend is a fakeBackend with maintenance mode.
type maintBackend struct {
	*fakeBackend
	mu     sync.Mutex
	calls  int
	on     bool
	reason string
}

func (b *maintBackend) SetMaint(_ context.Context, on bool, reason string) (api.MaintResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	b.on, b.reason = on, reason
	res := api.MaintResult{Maintenance: on}
	if on {
		res.Info = &api.MaintInfo{Reason: reason}
	}
	return res, nil
}

func startMaintServer(t *testing.T) (*testServer, *maintBackend) {
	t.Helper()
	fb := &fakeBackend{status: api.Status{Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleFollower}}
	mb := &maintBackend{fakeBackend: fb}
	return startServer(t, fb, Options{Backend: mb}), mb
}

func TestMaint(t *testing.T) {
	ts, mb := startMaintServer(t)
	var res api.MaintResult
	if resp := ts.do(t, http.MethodPost, api.PathMaint+"?enable=true&reason=kernel+upgrade", &res); resp.StatusCode != http.StatusOK || !res.Maintenance || res.Info.Reason != "kernel upgrade" {
		t.Fatalf("maint on: %d %+v", resp.StatusCode, res)
	}
	if resp := ts.do(t, http.MethodPost, api.PathMaint+"?enable=false", &res); resp.StatusCode != http.StatusOK || res.Maintenance {
		t.Fatalf("maint off: %d %+v", resp.StatusCode, res)
	}
	ts.expectError(t, http.MethodPost, api.PathMaint, http.StatusBadRequest)
	ts.expectError(t, http.MethodPost, api.PathMaint+"?enable=yes", http.StatusBadRequest)
	ts.expectError(t, http.MethodPost, api.PathMaint+"?enable=true&reason="+strings.Repeat("x", api.MaxMaintReason+1), http.StatusBadRequest)
	ts.expectError(t, http.MethodGet, api.PathMaint+"?enable=true", http.StatusMethodNotAllowed)
	if mb.calls != 2 {
		t.Errorf("backend called %d times, want 2 (refused requests must not reach it)", mb.calls)
	}
	// A backend without maintenance has no such endpoint.
	plain := startServer(t, nil, Options{})
	plain.expectError(t, http.MethodPost, api.PathMaint+"?enable=true", http.StatusNotFound)
}

const envMaintSocket = "CONCLAVE_TEST_MAINT_SOCKET"

// TestMaintPeerCredHelper is not a test: TestMaintNeedsTheAgentsUser runs
// the test binary as another user with this test selected.
func TestMaintPeerCredHelper(t *testing.T) {
	sock := os.Getenv(envMaintSocket)
	if sock == "" {
		t.Skip("helper process only")
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Post("http://agent"+api.PathMaint+"?enable=true", "", nil)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	resp.Body.Close()
	fmt.Printf("maint=%d\n", resp.StatusCode)
}

// Another local user who can open the socket must not change maintenance
// mode: it moves leadership, like resign.
func TestMaintNeedsTheAgentsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	mb := &maintBackend{fakeBackend: &fakeBackend{}}
	out := runAsNobody(t, mb, "TestMaintPeerCredHelper", envMaintSocket)
	if !strings.Contains(out, "maint=403") {
		t.Errorf("maint by another user was not refused with 403:\n%s", out)
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.calls != 0 {
		t.Errorf("backend saw %d maint requests from a refused caller", mb.calls)
	}
}
