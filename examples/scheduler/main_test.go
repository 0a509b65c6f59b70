package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/fence"
)

func TestMain(m *testing.M) {
	// agents_test.go runs this binary as scheduler replicas.
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// store is where a test's replicas keep their jobs: a SQLite file, or a
// fresh schema in the PostgreSQL server $CONCLAVE_TEST_POSTGRES names.
type store struct {
	sqlitePath string
	pgDSN      string
}

// stores returns the SQLite store and, when $CONCLAVE_TEST_POSTGRES is
// set (eval "$(bash scripts/databases start)"), a PostgreSQL one.
func stores(t *testing.T) map[string]store {
	t.Helper()
	out := map[string]store{"sqlite": {sqlitePath: filepath.Join(t.TempDir(), "jobs.db")}}
	dsn := os.Getenv("CONCLAVE_TEST_POSTGRES")
	if dsn == "" {
		t.Log("PostgreSQL mode not tested: CONCLAVE_TEST_POSTGRES is not set (eval \"$(bash scripts/databases start)\" sets it)")
		return out
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := fmt.Sprintf("sched_%d_%d", os.Getpid(), schemaSeq.Add(1))
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	// pgx passes unknown keys as run-time parameters: every connection
	// of this test lives in its own schema.
	out["postgres"] = store{pgDSN: dsn + " search_path=" + schema}
	return out
}

var schemaSeq atomic.Int64

func (st store) args() []string {
	if st.pgDSN != "" {
		return []string{"-postgres", st.pgDSN}
	}
	return []string{"-db", st.sqlitePath}
}

func newScheduler(t *testing.T, st store, fenced, unique bool) *scheduler {
	t.Helper()
	var db *sql.DB
	var err error
	dialect := fence.SQLite
	if st.pgDSN != "" {
		dialect = fence.Postgres
		db, err = openPostgres(context.Background(), st.pgDSN, unique)
	} else {
		db, err = openDB(context.Background(), st.sqlitePath, unique)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &scheduler{db: db, f: &fence.SQL{DB: db, Dialect: dialect}, schedule: "s", fenced: fenced, out: &bytes.Buffer{}, node: "n1"}
	if err := s.f.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWriteFencedStaleAndCollision: a newer leader's raise turns the old
// leader's next write into "stale"; a second job for one tick is a
// "duplicate" collision, not a second row.
func TestWriteFencedStaleAndCollision(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) { testWriteFencedStaleAndCollision(t, st) })
	}
}

func testWriteFencedStaleAndCollision(t *testing.T, st store) {
	ctx := context.Background()
	old := newScheduler(t, st, true, true)
	young := newScheduler(t, st, true, true)
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
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newScheduler(t, st, false, false)
			for _, epoch := range []uint64{2, 1} {
				if res, err := s.write(ctx, epoch, 100); res != "accepted" {
					t.Fatalf("unfenced write in epoch %d: %s %v", epoch, res, err)
				}
			}
			var n int
			if err := s.db.QueryRow("SELECT count(*) FROM jobs WHERE tick = 100").Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d jobs for tick 100 (%v), want 2 (the control run's duplicate)", n, err)
			}
		})
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
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) { testExitsOnLossOfLeadership(t, st) })
	}
}

func testExitsOnLossOfLeadership(t *testing.T, st store) {
	statuses := make(chan api.Status, 4)
	sock := fakeAgent(t, statuses)
	statuses <- api.Status{Node: "n1", Role: api.RoleFollower, Epoch: 3}
	statuses <- api.Status{Node: "n1", Role: api.RoleLeader, Leader: "n1", Epoch: 4}
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"-socket", sock}, st.args()...), &out, &out) }()
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
