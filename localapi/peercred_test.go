package localapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const envPeerSocket = "CONCLAVE_TEST_PEERCRED_SOCKET"

// TestPeerCredHelper is not a test: TestResignNeedsTheAgentsUser runs the
// test binary as another user with this test selected, to be a local
// process of that user.
func TestPeerCredHelper(t *testing.T) {
	sock := os.Getenv(envPeerSocket)
	if sock == "" {
		t.Skip("helper process only")
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	codes := make([]string, 0, 2)
	for _, req := range []struct{ method, path string }{{"POST", "/v1/resign"}, {"GET", "/v1/status"}} {
		r, err := http.NewRequest(req.method, "http://agent"+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(r)
		if err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes = append(codes, fmt.Sprintf("%s=%d %s", req.path, resp.StatusCode, strings.TrimSpace(string(body))))
	}
	c.CloseIdleConnections()
	fmt.Println(strings.Join(codes, "\n"))
}

// Another local user who can open the socket may read, but not make the
// agent resign; the agent's own user may (every other test in this package
// resigns as that user).
func TestResignNeedsTheAgentsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	backend := &fakeBackend{}
	got := runAsNobody(t, backend, "TestPeerCredHelper", envPeerSocket)
	if !strings.Contains(got, "/v1/resign=403") || !strings.Contains(got, "uid 65534") {
		t.Errorf("resign by another user was not refused with 403 naming the uid:\n%s", got)
	}
	if !strings.Contains(got, "/v1/status=200") {
		t.Errorf("status by another user was not answered:\n%s", got)
	}
	backend.mu.Lock()
	resigns := backend.resigns
	backend.mu.Unlock()
	if resigns != 0 {
		t.Errorf("backend saw %d resigns from a refused caller", resigns)
	}
}

// runAsNobody serves backend on a world-writable socket in a folder every
// user can enter, runs the test binary's helper test as uid 65534 with
// the socket's path in env, and returns the helper's output.
func runAsNobody(t *testing.T, backend Backend, helper, env string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	dir, err := os.MkdirTemp("", "peercred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy of this test binary that "nobody" may run.
	bin := filepath.Join(dir, "localapi.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Backend: backend, Hub: NewHub(4)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := Listen(sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Shutdown(context.Background())
		<-served
	}()
	cmd := exec.Command(bin, "-test.run=^"+helper+"$")
	cmd.Env = append(os.Environ(), env+"="+sock)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid 65534: %v\n%s", err, out)
	}
	return string(out)
}
