package fence

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func openSQLite(t *testing.T, path string, busyMS int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout("+strconv.Itoa(busyMS)+")")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newFence(t *testing.T) (*SQL, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	f := &SQL{DB: openSQLite(t, path, 5000), Dialect: SQLite}
	ctx := context.Background()
	if err := f.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Init(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := f.DB.ExecContext(ctx, "CREATE TABLE jobs (tick INTEGER PRIMARY KEY, epoch INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return f, path
}

func insertJob(tick, epoch uint64) func(Tx) error {
	return func(tx Tx) error {
		_, err := tx.ExecContext(context.Background(), "INSERT INTO jobs (tick, epoch) VALUES (?, ?)", tick, epoch)
		return err
	}
}

func countJobs(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSQLiteRaiseAndDo(t *testing.T) {
	ctx := context.Background()
	f, _ := newFence(t)

	if err := f.Do(ctx, 1, insertJob(1, 1)); !errors.Is(err, ErrNotRaised) {
		t.Fatalf("Do before Raise = %v, want ErrNotRaised", err)
	}
	if err := f.Raise(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Raise(ctx, 1); err != nil { // retried raise
		t.Fatalf("second Raise(1) = %v", err)
	}
	if err := f.Do(ctx, 1, insertJob(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Raise(ctx, 3); err != nil {
		t.Fatal(err)
	}
	err := f.Do(ctx, 1, insertJob(2, 1))
	var se *StaleError
	if !errors.As(err, &se) || se.Token != 1 || se.Highest != 3 {
		t.Fatalf("stale Do = %v, want *StaleError{1 3}", err)
	}
	if err := f.Raise(ctx, 2); !errors.Is(err, ErrStale) {
		t.Fatalf("Raise(2) after 3 = %v, want ErrStale", err)
	}
	if e, err := f.Epoch(ctx); err != nil || e != 3 {
		t.Fatalf("Epoch = %d, %v; want 3", e, err)
	}
	if n := countJobs(t, f.DB); n != 1 {
		t.Fatalf("%d jobs, want 1 (the stale insert must not commit)", n)
	}
}

func TestSQLiteDoRollsBackOnError(t *testing.T) {
	ctx := context.Background()
	f, _ := newFence(t)
	if err := f.Raise(ctx, 1); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := f.Do(ctx, 1, func(tx Tx) error {
		if err := insertJob(1, 1)(tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want boom", err)
	}
	if n := countJobs(t, f.DB); n != 0 {
		t.Fatalf("%d jobs after a failed transaction, want 0", n)
	}
	// The connection is usable again (no transaction left open).
	if err := f.Do(ctx, 1, insertJob(1, 1)); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteRaiseWaitsForFencedTransaction shows the lock: while a fenced
// transaction is open, a raise from another connection (another process,
// in production) cannot commit. With no busy timeout it fails at once.
func TestSQLiteRaiseWaitsForFencedTransaction(t *testing.T) {
	ctx := context.Background()
	f, path := newFence(t)
	if err := f.Raise(ctx, 1); err != nil {
		t.Fatal(err)
	}
	other := &SQL{DB: openSQLite(t, path, 0), Dialect: SQLite}
	var raiseErr error
	err := f.Do(ctx, 1, func(tx Tx) error {
		raiseErr = other.Raise(ctx, 2)
		return insertJob(1, 1)(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if raiseErr == nil || !strings.Contains(raiseErr.Error(), "locked") {
		t.Fatalf("Raise during a fenced transaction = %v, want a 'database is locked' error", raiseErr)
	}
	if err := other.Raise(ctx, 2); err != nil {
		t.Fatalf("Raise after the transaction = %v", err)
	}
}

func TestSQLBadTableAndDialect(t *testing.T) {
	ctx := context.Background()
	f, _ := newFence(t)
	bad := &SQL{DB: f.DB, Dialect: SQLite, Table: "x; DROP TABLE jobs"}
	if err := bad.Init(ctx); err == nil {
		t.Fatal("Init with an invalid table name succeeded")
	}
	bad = &SQL{DB: f.DB, Dialect: Dialect(9)}
	if err := bad.Raise(ctx, 1); err == nil {
		t.Fatal("Raise with an unknown dialect succeeded")
	}
	if Postgres.arg(2) != "$2" || MySQL.arg(2) != "?" || SQLite.arg(1) != "?" {
		t.Fatal("placeholders wrong")
	}
}
