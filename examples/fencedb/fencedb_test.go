// Package fencedb runs fence.SQL against real databases: SQLite always,
// PostgreSQL when $CONCLAVE_TEST_POSTGRES holds a DSN (pgx) and MariaDB or
// MySQL when $CONCLAVE_TEST_MYSQL does (go-sql-driver/mysql). scripts/databases
// starts throwaway servers and prints both variables; .ci/run uses it.
//
// It lives in the examples module so that the database drivers stay out of
// the agent's module graph.
package fencedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/conclave-agent/conclave/fence"
)

func TestMain(m *testing.M) {
	// database/sql's connection openers outlive a closed DB briefly.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// backend is one database the suite runs against.
type backend struct {
	name    string
	dialect fence.Dialect
	// open returns a new pool; lockFail makes lock waits fail at once
	// (or nearly), to show that a raise waits for a fenced transaction.
	open func(t *testing.T, lockFail bool) *sql.DB
}

func (b backend) ph(n int) string {
	if b.dialect == fence.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func backends(t *testing.T) []backend {
	sqlitePath := filepath.Join(t.TempDir(), "fence.sqlite")
	bs := []backend{{name: "sqlite", dialect: fence.SQLite, open: func(t *testing.T, lockFail bool) *sql.DB {
		busy := 5000
		if lockFail {
			busy = 0
		}
		return openDB(t, "sqlite", fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=busy_timeout(%d)", sqlitePath, busy))
	}}}
	if dsn := os.Getenv("CONCLAVE_TEST_POSTGRES"); dsn != "" {
		bs = append(bs, backend{name: "postgres", dialect: fence.Postgres, open: func(t *testing.T, lockFail bool) *sql.DB {
			d := dsn
			if lockFail {
				d += " lock_timeout=100" // pgx passes unknown keys as run-time parameters
			}
			return openDB(t, "pgx", d)
		}})
	} else {
		t.Log("PostgreSQL not tested: CONCLAVE_TEST_POSTGRES is not set (eval \"$(bash scripts/databases start)\" sets it)")
	}
	if dsn := os.Getenv("CONCLAVE_TEST_MYSQL"); dsn != "" {
		bs = append(bs, backend{name: "mysql", dialect: fence.MySQL, open: func(t *testing.T, lockFail bool) *sql.DB {
			d := dsn
			if lockFail {
				sep := "?"
				if strings.Contains(d, "?") {
					sep = "&"
				}
				d += sep + "innodb_lock_wait_timeout=1" // whole seconds only
			}
			return openDB(t, "mysql", d)
		}})
	} else {
		t.Log("MariaDB/MySQL not tested: CONCLAVE_TEST_MYSQL is not set (eval \"$(bash scripts/databases start)\" sets it)")
	}
	return bs
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("%s: %v", driver, err)
	}
	return db
}

// forEach runs fn as a subtest per backend.
func forEach(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

var tableSeq atomic.Int64

// fixture is one test's fence table and jobs table, unique names so tests
// share a server, dropped at the end.
type fixture struct {
	b     backend
	db    *sql.DB
	fence *fence.SQL
	jobs  string
}

func newFixture(t *testing.T, b backend, unique bool) *fixture {
	t.Helper()
	ctx := context.Background()
	n := fmt.Sprintf("%d_%d", os.Getpid(), tableSeq.Add(1))
	db := b.open(t, false)
	fx := &fixture{b: b, db: db, jobs: "jobs_" + n,
		fence: &fence.SQL{DB: db, Dialect: b.dialect, Table: "fence_" + n}}
	if err := fx.fence.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fx.fence.Init(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	key := ""
	if unique {
		key = ", UNIQUE (tick)"
	}
	// epoch_at_write is the fence table's epoch when the row was written:
	// a row whose epoch is below it was written by a replaced leader.
	q := fmt.Sprintf("CREATE TABLE %s (tick BIGINT NOT NULL, epoch BIGINT NOT NULL, epoch_at_write BIGINT NOT NULL%s)", fx.jobs, key)
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{fx.jobs, fx.fence.Table} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE "+tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return fx
}

// insert writes the job of one tick, recording the fence epoch seen.
func (fx *fixture) insert(tick, epoch uint64) func(fence.Tx) error {
	q := fmt.Sprintf("INSERT INTO %s (tick, epoch, epoch_at_write) SELECT %s, %s, epoch FROM %s WHERE id = 1",
		fx.jobs, fx.b.ph(1), fx.b.ph(2), fx.fence.Table)
	return func(tx fence.Tx) error {
		_, err := tx.ExecContext(context.Background(), q, tick, epoch)
		return err
	}
}

// write is one leader's write: through the fence, or (control runs) straight.
func (fx *fixture) write(fenced bool, tick, epoch uint64) error {
	if fenced {
		return fx.fence.Do(context.Background(), epoch, fx.insert(tick, epoch))
	}
	return fx.insert(tick, epoch)(fx.db)
}

func (fx *fixture) count(t *testing.T, where string) int {
	t.Helper()
	var n int
	if err := fx.db.QueryRow("SELECT count(*) FROM " + fx.jobs + " " + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// staleRows counts jobs written by a leader after a newer one raised.
func (fx *fixture) staleRows(t *testing.T) int {
	return fx.count(t, "WHERE epoch < epoch_at_write")
}

// duplicateTicks counts ticks with more than one job.
func (fx *fixture) duplicateTicks(t *testing.T) int {
	t.Helper()
	var n int
	q := fmt.Sprintf("SELECT count(*) FROM (SELECT tick FROM %s GROUP BY tick HAVING count(*) > 1) d", fx.jobs)
	if err := fx.db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRaiseAndDo(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		fx := newFixture(t, b, true)
		f := fx.fence
		if err := f.Do(ctx, 1, fx.insert(1, 1)); !errors.Is(err, fence.ErrNotRaised) {
			t.Fatalf("Do before Raise = %v, want ErrNotRaised", err)
		}
		if err := f.Raise(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.Raise(ctx, 1); err != nil { // a retried raise
			t.Fatalf("second Raise(1) = %v", err)
		}
		if err := f.Do(ctx, 1, fx.insert(1, 1)); err != nil {
			t.Fatal(err)
		}
		if err := f.Raise(ctx, 3); err != nil {
			t.Fatal(err)
		}
		err := f.Do(ctx, 1, fx.insert(2, 1))
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Token != 1 || se.Highest != 3 {
			t.Fatalf("stale Do = %v, want *StaleError{1 3}", err)
		}
		if err := f.Raise(ctx, 2); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Raise(2) after 3 = %v, want ErrStale", err)
		}
		if e, err := f.Epoch(ctx); err != nil || e != 3 {
			t.Fatalf("Epoch = %d, %v; want 3", e, err)
		}
		if n := fx.count(t, ""); n != 1 {
			t.Fatalf("%d jobs, want 1 (the stale insert must not commit)", n)
		}
	})
}

func TestDoRollsBackOnError(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		fx := newFixture(t, b, true)
		if err := fx.fence.Raise(ctx, 1); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := fx.fence.Do(ctx, 1, func(tx fence.Tx) error {
			if err := fx.insert(1, 1)(tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Do = %v, want boom", err)
		}
		if n := fx.count(t, ""); n != 0 {
			t.Fatalf("%d jobs after a failed transaction, want 0", n)
		}
		if err := fx.fence.Do(ctx, 1, fx.insert(1, 1)); err != nil {
			t.Fatal(err)
		}
		// A unique-key violation inside the transaction is the caller's
		// error, wrapped, and rolls back too.
		if err := fx.fence.Do(ctx, 1, fx.insert(1, 1)); err == nil {
			t.Fatal("second job for tick 1 committed despite UNIQUE (tick)")
		}
		if n := fx.count(t, ""); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})
}

// TestRaiseWaitsForFencedTransaction shows the lock: while a fenced
// transaction is open, a raise from another pool (another process, in
// production) cannot commit; with a short lock timeout it fails. Without
// the shared lock the raise would commit and the stale transaction after it.
func TestRaiseWaitsForFencedTransaction(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		fx := newFixture(t, b, true)
		if err := fx.fence.Raise(ctx, 1); err != nil {
			t.Fatal(err)
		}
		other := &fence.SQL{DB: b.open(t, true), Dialect: b.dialect, Table: fx.fence.Table}
		var raiseErr error
		err := fx.fence.Do(ctx, 1, func(tx fence.Tx) error {
			raiseErr = other.Raise(ctx, 2)
			return fx.insert(1, 1)(tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if raiseErr == nil {
			t.Fatal("Raise(2) committed while a fenced transaction at epoch 1 was open")
		}
		if !isLockWait(raiseErr) {
			t.Fatalf("Raise during a fenced transaction = %v, want a lock-wait error", raiseErr)
		}
		if err := other.Raise(ctx, 2); err != nil {
			t.Fatalf("Raise after the transaction = %v", err)
		}
		if err := fx.fence.Do(ctx, 1, fx.insert(2, 1)); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Do(1) after Raise(2) = %v, want ErrStale", err)
		}
	})
}

func isLockWait(err error) bool {
	s := err.Error()
	return strings.Contains(s, "database is locked") || // SQLite
		strings.Contains(s, "lock timeout") || // PostgreSQL 55P03
		strings.Contains(s, "Lock wait timeout") // MySQL/MariaDB 1205
}

// staleScenario: leader 1 writes, leader 2 raises and writes, then leader 1
// wakes from a pause still believing it leads and writes again.
func staleScenario(t *testing.T, fx *fixture, fenced bool) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fx.fence.Raise(ctx, 1))
	must(fx.write(fenced, 1, 1))
	must(fx.fence.Raise(ctx, 2))
	must(fx.write(fenced, 2, 2))
	err := fx.write(fenced, 3, 1)
	if fenced && !errors.Is(err, fence.ErrStale) {
		t.Fatalf("woken leader's write = %v, want ErrStale", err)
	}
	if !fenced {
		must(err)
	}
}

// duplicateScenario: leader 2 writes ticks 5 and 6; replaced leader 1,
// woken, writes tick 6 too.
func duplicateScenario(t *testing.T, fx *fixture, fenced bool) {
	ctx := context.Background()
	for _, e := range []uint64{1, 2} {
		if err := fx.fence.Raise(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tick := range []uint64{5, 6} {
		if err := fx.write(fenced, tick, 2); err != nil {
			t.Fatal(err)
		}
	}
	err := fx.write(fenced, 6, 1)
	if fenced && err == nil {
		t.Fatal("replaced leader's job for tick 6 committed")
	}
}

func TestStaleWrite(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		fx := newFixture(t, b, true)
		staleScenario(t, fx, true)
		if n := fx.staleRows(t); n != 0 {
			t.Fatalf("%d stale jobs with fencing on, want 0", n)
		}
	})
}

// TestStaleWriteControl switches fencing off: the same scenario must leave
// a stale job behind, or the check above proves nothing.
func TestStaleWriteControl(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		fx := newFixture(t, b, false)
		staleScenario(t, fx, false)
		if n := fx.staleRows(t); n != 1 {
			t.Fatalf("control: %d stale jobs with fencing off, want 1", n)
		}
		t.Logf("control run found %d stale job (fencing off)", 1)
	})
}

func TestDuplicate(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		fx := newFixture(t, b, true)
		duplicateScenario(t, fx, true)
		if n := fx.duplicateTicks(t); n != 0 {
			t.Fatalf("%d ticks with two jobs with fencing on, want 0", n)
		}
	})
}

// TestDuplicateControl: fencing and the UNIQUE key off, as in the chaos
// harness's control run; the duplicate must be there.
func TestDuplicateControl(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		fx := newFixture(t, b, false)
		duplicateScenario(t, fx, false)
		if n := fx.duplicateTicks(t); n != 1 {
			t.Fatalf("control: %d duplicated ticks with fencing off, want 1", n)
		}
		t.Logf("control run found %d duplicated tick (fencing off)", 1)
	})
}

// TestConcurrentLeaders races leaders with epochs 1..n started in random
// order, each raising and then writing until it is fenced off. Whatever
// the interleaving, no job may be written below the epoch in force.
func TestConcurrentLeaders(t *testing.T) {
	const leaders, writes = 6, 15
	forEach(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		fx := newFixture(t, b, true)
		var tick atomic.Uint64
		var refused atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, leaders)
		for _, e := range rand.Perm(leaders) {
			epoch := uint64(e + 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fx.fence.Raise(ctx, epoch); err != nil {
					if !errors.Is(err, fence.ErrStale) {
						errs <- fmt.Errorf("raise %d: %w", epoch, err)
					}
					return
				}
				for range writes {
					err := fx.fence.Do(ctx, epoch, fx.insert(tick.Add(1), epoch))
					if errors.Is(err, fence.ErrStale) {
						refused.Add(1)
						return
					}
					if err != nil {
						errs <- fmt.Errorf("leader %d: %w", epoch, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := fx.staleRows(t); n != 0 {
			t.Fatalf("%d jobs written below the epoch in force", n)
		}
		t.Logf("%d jobs, %d leaders fenced off mid-run", fx.count(t, ""), refused.Load())
	})
}
