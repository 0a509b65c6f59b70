package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/localapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is a localapi.Backend whose answers tests set.
type backend struct {
	mu          sync.Mutex
	status      api.Status
	members     []api.Member
	resignErr   error
	healthErr   error
	statusCalls chan struct{}
}

func (b *backend) Status(ctx context.Context, consistent bool) (api.Status, error) {
	b.mu.Lock()
	st, calls := b.status, b.statusCalls
	b.mu.Unlock()
	if calls != nil {
		select {
		case calls <- struct{}{}:
		default:
		}
	}
	if consistent && st.Protocol != "majority" {
		return api.Status{}, fmt.Errorf("%s: %w", st.Protocol, localapi.ErrConsistentUnsupported)
	}
	return st, nil
}

func (b *backend) Members(context.Context) ([]api.Member, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.members, nil
}

func (b *backend) Resign(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.resignErr
}

func (b *backend) Health(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.healthErr
}

func (b *backend) setStatus(st api.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status = st
}

type agent struct {
	be     *backend
	hub    *localapi.Hub
	srv    *localapi.Server
	socket string
}

func status(epoch uint64, role, leader string) api.Status {
	return api.Status{Election: api.DefaultElection, Node: "n1", ID: 1, Protocol: "majority", Role: role, Leader: leader, Epoch: epoch, Members: 3,
		Quorum: api.Quorum{Voters: 3, Reachable: 3, Healthy: true}}
}

// startAgent serves a fake backend through the real localapi server on a
// real Unix socket.
func startAgent(t *testing.T) *agent {
	t.Helper()
	dir, err := os.MkdirTemp("", "cl") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &agent{be: &backend{status: status(1, api.RoleFollower, "n2")}, hub: localapi.NewHub(0), socket: filepath.Join(dir, "agent.sock")}
	a.hub.Publish(a.be.status)
	a.srv, err = localapi.New(localapi.Options{Backend: a.be, Hub: a.hub})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := localapi.Listen(a.socket, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.srv.Serve(ln) }()
	t.Cleanup(func() {
		a.hub.Close()
		if err := a.srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return a
}

func newClient(t *testing.T, socket string) *client.Client {
	c := client.New(socket)
	t.Cleanup(c.Close)
	return c
}

func TestZeroValueUsesDefaultSocket(t *testing.T) {
	a := startAgent(t)
	t.Setenv(api.EnvSocket, a.socket)
	var c client.Client
	defer c.Close()
	if c.Socket() != a.socket {
		t.Fatalf("Socket() = %q, want $%s = %q", c.Socket(), api.EnvSocket, a.socket)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatalf("Health: %v", err)
	}
}

func TestStatusLeaderMembers(t *testing.T) {
	a := startAgent(t)
	c := newClient(t, a.socket)
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || st != a.be.status {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if _, err := c.ConsistentStatus(ctx); err != nil {
		t.Errorf("ConsistentStatus (majority): %v", err)
	}
	l, err := c.Leader(ctx, 0, 0)
	if err != nil || l != (api.Leader{Leader: "n2", Epoch: 1}) {
		t.Errorf("Leader = %+v, %v", l, err)
	}
	a.be.mu.Lock()
	a.be.members = []api.Member{{Name: "n1", ID: 1, Addr: "127.0.0.1:7946", State: api.StateAlive}, {Name: "n2", ID: 2, Addr: "127.0.0.1:7950", State: api.StateSuspect, Phi: 9.5}}
	a.be.mu.Unlock()
	ms, err := c.Members(ctx)
	if err != nil || len(ms) != 2 || ms[1].Phi != 9.5 || ms[1].State != api.StateSuspect {
		t.Errorf("Members = %+v, %v", ms, err)
	}
}

func TestTypedErrors(t *testing.T) {
	a := startAgent(t)
	c := newClient(t, a.socket)
	ctx := context.Background()

	a.be.mu.Lock()
	a.be.resignErr = fmt.Errorf("majority: %w", localapi.ErrNotLeader)
	a.be.mu.Unlock()
	err := c.Resign(ctx)
	var ce *client.Error
	if !errors.Is(err, client.ErrNotLeader) || !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict {
		t.Errorf("Resign on a follower: %v, want *Error 409 matching ErrNotLeader", err)
	}

	a.be.setStatus(api.Status{Protocol: "bully"})
	_, err = c.ConsistentStatus(ctx)
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest || !strings.Contains(ce.Message, "not supported") {
		t.Errorf("consistent on bully: %v", err)
	}
	if errors.Is(err, client.ErrNotLeader) {
		t.Error("a 400 matches ErrNotLeader")
	}

	a.be.mu.Lock()
	a.be.healthErr = errors.New("loop stopped")
	a.be.mu.Unlock()
	err = c.Health(ctx)
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("Health: %v, want 503", err)
	}

	a.be.mu.Lock()
	a.be.resignErr = nil
	a.be.mu.Unlock()
	if err := c.Resign(ctx); err != nil {
		t.Errorf("Resign on the leader: %v", err)
	}
}

func TestNoAgent(t *testing.T) {
	c := newClient(t, filepath.Join(t.TempDir(), "none.sock"))
	err := c.Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is the agent running") {
		t.Errorf("Health without an agent: %v", err)
	}
	if _, err := c.Watch(context.Background()); err == nil {
		t.Error("Watch without an agent succeeded")
	}
}

func TestLeaderBlocking(t *testing.T) {
	a := startAgent(t)
	calls := make(chan struct{}, 1)
	a.be.mu.Lock()
	a.be.statusCalls = calls
	a.be.mu.Unlock()
	c := newClient(t, a.socket)
	type res struct {
		l   api.Leader
		err error
	}
	done := make(chan res, 1)
	go func() {
		l, err := c.Leader(context.Background(), 1, time.Minute)
		done <- res{l, err}
	}()
	<-calls // the server saw epoch 1 and waits
	next := status(2, api.RoleLeader, "n1")
	a.be.setStatus(next)
	a.hub.Publish(next)
	r := <-done
	if r.err != nil || r.l != (api.Leader{Leader: "n1", Epoch: 2, IsSelf: true}) {
		t.Errorf("blocking Leader = %+v, %v", r.l, r.err)
	}
	// A wait that elapses returns the current leader, epoch not past index.
	l, err := c.Leader(context.Background(), 2, time.Millisecond)
	if err != nil || l.Epoch != 2 {
		t.Errorf("elapsed Leader = %+v, %v", l, err)
	}
}

func TestLeaderBlockingCancelled(t *testing.T) {
	a := startAgent(t)
	calls := make(chan struct{}, 1)
	a.be.mu.Lock()
	a.be.statusCalls = calls
	a.be.mu.Unlock()
	c := newClient(t, a.socket)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Leader(ctx, 1, time.Minute)
		done <- err
	}()
	<-calls
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Leader: %v", err)
	}
}

func TestWatch(t *testing.T) {
	a := startAgent(t)
	c := newClient(t, a.socket)
	w, err := c.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, err := w.Next()
	if err != nil || st != a.be.status {
		t.Fatalf("first Next = %+v, %v; want the current status", st, err)
	}
	for e := uint64(2); e <= 4; e++ {
		a.hub.Publish(status(e, api.RoleFollower, "n3"))
		st, err := w.Next()
		if err != nil || st.Epoch != e {
			t.Fatalf("Next = %+v, %v; want epoch %d", st, err, e)
		}
	}
	a.hub.Close() // the agent stops
	if _, err := w.Next(); !errors.Is(err, client.ErrWatchEnded) || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Next after the agent stopped: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	w.Close()
}

func TestWatchCancel(t *testing.T) {
	a := startAgent(t)
	c := newClient(t, a.socket)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := w.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v", err)
	}
}

// A socket path that names a directory or a regular file is reported as
// such (ErrNotSocket), not as an agent that does not answer.
func TestNotASocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{dir: "is a directory, not a socket", file: "is a regular file, not a socket"} {
		c := client.New(path)
		_, err := c.Status(context.Background())
		c.Close()
		if !errors.Is(err, client.ErrNotSocket) || !strings.Contains(err.Error(), path+" "+want) {
			t.Errorf("socket %s: %v; want ErrNotSocket saying %q", path, err, want)
		}
	}
	c := client.New(filepath.Join(dir, "missing.sock"))
	defer c.Close()
	if _, err := c.Status(context.Background()); errors.Is(err, client.ErrNotSocket) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing socket: %v; want not-exist, not ErrNotSocket", err)
	}
}
