package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/conclave-agent/conclave/api"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeBackend is a Backend whose answers tests set.
type fakeBackend struct {
	mu            sync.Mutex
	status        api.Status
	members       []api.Member
	consistentErr error // returned for consistent Status
	healthErr     error
	resignErr     error
	resigns       int
	statusCalls   chan struct{} // if non-nil, signalled (non-blocking) on every Status call
}

func (b *fakeBackend) Status(ctx context.Context, consistent bool) (api.Status, error) {
	b.mu.Lock()
	st, cerr, calls := b.status, b.consistentErr, b.statusCalls
	b.mu.Unlock()
	if calls != nil {
		select {
		case calls <- struct{}{}:
		default:
		}
	}
	if consistent && cerr != nil {
		return api.Status{}, cerr
	}
	return st, nil
}

func (b *fakeBackend) Members(ctx context.Context) ([]api.Member, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.members, nil
}

func (b *fakeBackend) Resign(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resigns++
	return b.resignErr
}

func (b *fakeBackend) Health(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.healthErr
}

func (b *fakeBackend) set(f func(b *fakeBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

// testServer is a Server on a real Unix socket.
type testServer struct {
	srv    *Server
	hub    *Hub
	be     *fakeBackend
	socket string
	client *http.Client
}

// startServer serves be (nil: a follower of n2) on a fresh socket until the
// test ends. opts.Backend, when set, is served instead: a fake that adds
// endpoints to be (maint, voters).
func startServer(t *testing.T, be *fakeBackend, opts Options) *testServer {
	t.Helper()
	if be == nil {
		be = &fakeBackend{status: api.Status{Election: api.DefaultElection, Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleFollower, Leader: "n2", Epoch: 1}}
	}
	if opts.Hub == nil {
		opts.Hub = NewHub(0)
	}
	if opts.Backend == nil {
		opts.Backend = be
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Short directory: Unix socket paths are limited to ~104 bytes.
	socket := filepath.Join(shortTempDir(t), "agent.sock")
	ln, err := Listen(socket, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ts := &testServer{srv: srv, hub: opts.Hub, be: be, socket: socket, client: unixClient(socket)}
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		opts.Hub.Close()
		ts.client.CloseIdleConnections()
	})
	return ts
}

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// do sends a request and decodes a JSON answer into out (if non-nil).
func (ts *testServer) do(t *testing.T, method, path string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+api.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, path, body, err)
		}
	}
	return resp
}

// errorBody decodes an api.Error answer and checks its status code.
func (ts *testServer) expectError(t *testing.T, method, path string, code int) string {
	t.Helper()
	var e api.Error
	resp := ts.do(t, method, path, &e)
	if resp.StatusCode != code {
		t.Errorf("%s %s: status %d, want %d (error %q)", method, path, resp.StatusCode, code, e.Error)
	}
	if ct := resp.Header.Get("Content-Type"); ct != api.ContentTypeJSON {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if e.Error == "" {
		t.Errorf("%s %s: empty error message", method, path)
	}
	return e.Error
}

func (ts *testServer) mustBeHealthy(t *testing.T) {
	t.Helper()
	var h api.Health
	if resp := ts.do(t, http.MethodGet, api.PathHealth, &h); resp.StatusCode != http.StatusOK || h.Status != "ok" {
		t.Fatalf("health: %d %+v", resp.StatusCode, h)
	}
}

// watchStream opens /v1/watch and returns a line reader.
func (ts *testServer) watch(t *testing.T, ctx context.Context) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api.Host+api.PathWatch, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewScanner(resp.Body)
}

func nextLine(t *testing.T, sc *bufio.Scanner) api.WatchLine {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("watch stream ended: %v", sc.Err())
	}
	var l api.WatchLine
	if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
		t.Fatalf("watch line %q: %v", sc.Bytes(), err)
	}
	return l
}

var errTest = errors.New("test failure")

func statusEpoch(e uint64) api.Status {
	return api.Status{Election: api.DefaultElection, Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleFollower, Leader: fmt.Sprintf("n%d", e%3+1), Epoch: e}
}

// shortTempDir is a temporary directory with a short path: t.TempDir()
// includes the test name and can exceed the ~104-byte socket path limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
