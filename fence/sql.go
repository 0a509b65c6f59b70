package fence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Dialect says how a database takes the shared lock the fencing check needs
// and how it writes placeholders.
type Dialect int

const (
	// Postgres: $1 placeholders; the check reads the epoch row FOR SHARE,
	// so a concurrent raise waits for the transaction to end.
	Postgres Dialect = iota
	// MySQL and MariaDB (InnoDB): ? placeholders; the check reads the
	// epoch row LOCK IN SHARE MODE, which both accept (MariaDB, at least
	// to 10.11, rejects MySQL 8's FOR SHARE spelling).
	MySQL
	// SQLite: ? placeholders and no row locks; every fenced transaction is
	// a write transaction (BEGIN IMMEDIATE), which excludes a concurrent
	// raise for its whole length.
	SQLite
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

func (d Dialect) arg(n int) string {
	if d == Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func (d Dialect) valid() bool { return d >= Postgres && d <= SQLite }

// ErrNotRaised is returned by SQL.Do when the table's epoch is lower than
// the token: this leadership has not called Raise yet (or its Raise was
// lost). Nothing was written.
var ErrNotRaised = errors.New("fence: epoch not raised to this token yet")

// Tx is what a fenced transaction's function gets: *sql.Tx and *sql.Conn
// both satisfy it. It must not commit or roll back itself.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQL fences side effects in a database/sql database with a one-row epoch
// table. The new leader calls Raise with its token once; every
// side-effecting transaction runs through Do with the same token, which
// checks epoch = token under a shared lock in the same transaction, so a
// stale leader's transaction either commits before the newer leader's
// raise or not at all.
type SQL struct {
	// DB is the database. For SQLite, set a busy timeout in the DSN
	// (_pragma=busy_timeout(5000) with modernc.org/sqlite) so that writers
	// wait for each other instead of failing at once.
	DB *sql.DB
	// Dialect selects the locking and placeholders.
	Dialect Dialect
	// Table is the epoch table's name; empty means "fence_epoch", or
	// "fence_epoch_NAME" for Election NAME. Letters, digits and '_' only
	// (it is pasted into SQL).
	Table string
	// Election is the election whose epochs this fence checks: "" or
	// "default" for the default one. Epochs of different elections are
	// unrelated numbers, so each election needs its own table; with
	// Table empty, the name picks it ('-' becomes '_').
	Election string
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (f *SQL) table() (string, error) {
	t := f.Table
	if t == "" {
		t = "fence_epoch"
		if f.Election != "" && f.Election != "default" {
			t += "_" + strings.ReplaceAll(f.Election, "-", "_")
		}
	}
	if !identRE.MatchString(t) {
		return "", fmt.Errorf("fence: invalid table name %q", t)
	}
	if !f.Dialect.valid() {
		return "", fmt.Errorf("fence: unknown dialect %d", int(f.Dialect))
	}
	if f.DB == nil {
		return "", errors.New("fence: nil DB")
	}
	return t, nil
}

// Init creates the epoch table with its one row at epoch 0 if it does not
// exist. It is idempotent and never lowers an existing epoch.
func (f *SQL) Init(ctx context.Context) error {
	t, err := f.table()
	if err != nil {
		return err
	}
	create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id INTEGER NOT NULL PRIMARY KEY, epoch BIGINT NOT NULL)", t)
	if _, err := f.DB.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("fence: create %s: %w", t, err)
	}
	var insert string
	switch f.Dialect {
	case Postgres:
		insert = fmt.Sprintf("INSERT INTO %s (id, epoch) VALUES (1, 0) ON CONFLICT (id) DO NOTHING", t)
	case MySQL:
		insert = fmt.Sprintf("INSERT IGNORE INTO %s (id, epoch) VALUES (1, 0)", t)
	case SQLite:
		insert = fmt.Sprintf("INSERT OR IGNORE INTO %s (id, epoch) VALUES (1, 0)", t)
	}
	if _, err := f.DB.ExecContext(ctx, insert); err != nil {
		return fmt.Errorf("fence: initialise %s: %w", t, err)
	}
	return nil
}

// Raise sets the table's epoch to token if it is lower (UPDATE … WHERE
// epoch < token). A table already at token is fine (a retried raise); one
// above token means a newer leader has raised it: *StaleError.
func (f *SQL) Raise(ctx context.Context, token uint64) error {
	t, err := f.table()
	if err != nil {
		return err
	}
	q := fmt.Sprintf("UPDATE %s SET epoch = %s WHERE id = 1 AND epoch < %s", t, f.Dialect.arg(1), f.Dialect.arg(2))
	res, err := f.DB.ExecContext(ctx, q, token, token)
	if err != nil {
		return fmt.Errorf("fence: raise %s to %d: %w", t, token, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	// Nothing changed (or the driver cannot say): look at what is there.
	var cur uint64
	q = fmt.Sprintf("SELECT epoch FROM %s WHERE id = 1", t)
	if err := f.DB.QueryRowContext(ctx, q).Scan(&cur); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("fence: raise %s to %d: no epoch row (call Init)", t, token)
		}
		return fmt.Errorf("fence: raise %s to %d: read epoch: %w", t, token, err)
	}
	switch {
	case cur > token:
		return &StaleError{Token: token, Highest: cur}
	case cur < token:
		return fmt.Errorf("fence: raise %s to %d: epoch still %d after update", t, token, cur)
	}
	return nil
}

// Epoch returns the table's current epoch.
func (f *SQL) Epoch(ctx context.Context) (uint64, error) {
	t, err := f.table()
	if err != nil {
		return 0, err
	}
	var cur uint64
	if err := f.DB.QueryRowContext(ctx, fmt.Sprintf("SELECT epoch FROM %s WHERE id = 1", t)).Scan(&cur); err != nil {
		return 0, fmt.Errorf("fence: read epoch of %s: %w", t, err)
	}
	return cur, nil
}

// Do runs fn in one transaction that first checks, under a shared lock,
// that the table's epoch equals token, and commits only if fn returns nil.
// A higher epoch yields a *StaleError and a lower one ErrNotRaised; in both
// cases fn does not run. fn's error is returned wrapped (errors.Is and
// errors.As see through it) after the transaction is rolled back.
func (f *SQL) Do(ctx context.Context, token uint64, fn func(Tx) error) error {
	t, err := f.table()
	if err != nil {
		return err
	}
	if f.Dialect == SQLite {
		return f.doSQLite(ctx, t, token, fn)
	}
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	lock := "FOR SHARE"
	if f.Dialect == MySQL {
		lock = "LOCK IN SHARE MODE"
	}
	q := fmt.Sprintf("SELECT epoch FROM %s WHERE id = 1 %s", t, lock)
	if err := check(ctx, tx, q, token, fn); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit at epoch %d: %w", token, err)
	}
	return nil
}

// doSQLite runs the fenced transaction as BEGIN IMMEDIATE on one
// connection: database/sql's BeginTx would start a deferred transaction,
// whose read of the epoch takes no lock that a raise must wait for.
func (f *SQL) doSQLite(ctx context.Context, t string, token uint64, fn func(Tx) error) error {
	conn, err := f.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("fence: connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("fence: begin immediate: %w", err)
	}
	q := fmt.Sprintf("SELECT epoch FROM %s WHERE id = 1", t)
	if err := check(ctx, conn, q, token, fn); err != nil {
		// A background context: the rollback must happen even when ctx
		// is what ended the transaction.
		if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); rerr != nil {
			// The connection's state is unknown: make database/sql drop it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("fence: commit at epoch %d: %w", token, err)
	}
	return nil
}

func check(ctx context.Context, tx Tx, q string, token uint64, fn func(Tx) error) error {
	var cur uint64
	if err := tx.QueryRowContext(ctx, q).Scan(&cur); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return errors.New("fence: no epoch row (call Init)")
		}
		return fmt.Errorf("fence: read epoch: %w", err)
	}
	switch {
	case cur > token:
		return &StaleError{Token: token, Highest: cur}
	case cur < token:
		return fmt.Errorf("%w: epoch %d, token %d", ErrNotRaised, cur, token)
	}
	if err := fn(tx); err != nil {
		return fmt.Errorf("fence: fenced transaction at epoch %d: %w", token, err)
	}
	return nil
}
