package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/fence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newScheduler(t *testing.T, path string, fenced, unique bool) *scheduler {
	t.Helper()
	db, err := openDB(context.Background(), path, unique)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &scheduler{db: db, f: &fence.SQL{DB: db, Dialect: fence.SQLite}, schedule: "s", fenced: fenced, out: &bytes.Buffer{}, node: "n1"}
	if err := s.f.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWriteFencedStaleAndCollision: a newer leader's raise turns the old
// leader's next write into "stale"; a second job for one tick is a
// "duplicate" collision, not a second row.
func TestWriteFencedStaleAndCollision(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	old := newScheduler(t, path, true, true)
	young := newScheduler(t, path, true, true)
	if err := old.f.Raise(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := old.write(ctx, 1, 100); res != "accepted" {
		t.Fatalf("first write: %s %v", res, err)
	}
	if err := young.f.Raise(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if res, err := young.write(ctx, 2, 100); res != "duplicate" {
		t.Fatalf("second job for tick 100: %s %v, want duplicate", res, err)
	}
	if res, err := old.write(ctx, 1, 101); res != "stale" || !errors.Is(err, fence.ErrStale) {
		t.Fatalf("old leader after the raise: %s %v, want stale", res, err)
	}
	var n int
	if err := old.db.QueryRow("SELECT count(*) FROM jobs").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d jobs (%v), want 1", n, err)
	}
}

// TestWriteUnfencedAcceptsStale is the control: without the check and the
// key, the old leader's job goes in beside the new one's.
func TestWriteUnfencedAcceptsStale(t *testing.T) {
	ctx := context.Background()
	s := newScheduler(t, filepath.Join(t.TempDir(), "jobs.db"), false, false)
	for _, epoch := range []uint64{2, 1} {
		if res, err := s.write(ctx, epoch, 100); res != "accepted" {
			t.Fatalf("unfenced write in epoch %d: %s %v", epoch, res, err)
		}
	}
}

// fakeAgent serves /v1/watch on a Unix socket, sending each status given
// on its channel.
func fakeAgent(t *testing.T, statuses <-chan api.Status) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathWatch {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", api.ContentTypeNDJSON)
		enc := json.NewEncoder(w)
		for {
			select {
			case <-r.Context().Done():
				return
			case st, ok := <-statuses:
				if !ok {
					return
				}
				_ = enc.Encode(st)
				w.(http.Flusher).Flush()
			}
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExitsOnLossOfLeadership: leader in epoch 4, raise, then the agent
// says follower — the replica exits with status 3 at once.
func TestExitsOnLossOfLeadership(t *testing.T) {
	statuses := make(chan api.Status, 4)
	sock := fakeAgent(t, statuses)
	statuses <- api.Status{Node: "n1", Role: api.RoleFollower, Epoch: 3}
	statuses <- api.Status{Node: "n1", Role: api.RoleLeader, Leader: "n1", Epoch: 4}
	var out syncBuffer
	done := make(chan int, 1)
	db := filepath.Join(t.TempDir(), "jobs.db")
	go func() { done <- run([]string{"-socket", sock, "-db", db}, &out, &out) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"ev":"raise"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no raise within 20 s; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	statuses <- api.Status{Node: "n1", Role: api.RoleFollower, Leader: "n2", Epoch: 5}
	select {
	case code := <-done:
		if code != exitLost {
			t.Fatalf("exit status %d, want %d; output:\n%s", code, exitLost, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after losing leadership; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `"ev":"lost"`) {
		t.Fatalf("no lost event:\n%s", out.String())
	}
}
