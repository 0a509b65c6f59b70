package fence

import (
	"context"
	"database/sql"
	"testing"
)

// The SQL fence's behaviour against SQLite, PostgreSQL and MariaDB/MySQL
// is tested in examples/fencedb (its own module, so the database drivers
// stay out of this one's graph); here only what needs no database.

func TestSQLBadTableAndDialect(t *testing.T) {
	ctx := context.Background()
	bad := &SQL{Dialect: SQLite, Table: "x; DROP TABLE jobs"}
	if err := bad.Init(ctx); err == nil {
		t.Fatal("Init with an invalid table name succeeded")
	}
	bad = &SQL{Dialect: Dialect(9)}
	if err := bad.Raise(ctx, 1); err == nil {
		t.Fatal("Raise with an unknown dialect succeeded")
	}
	if err := (&SQL{Dialect: Postgres}).Do(ctx, 1, nil); err == nil {
		t.Fatal("Do with a nil DB succeeded")
	}
	if Postgres.arg(2) != "$2" || MySQL.arg(2) != "?" || SQLite.arg(1) != "?" {
		t.Fatal("placeholders wrong")
	}
}

// Each election's epochs get a table of their own: two elections' tokens
// are unrelated numbers, and one table would let either's leader fence
// out the other's.
func TestSQLTablePerElection(t *testing.T) {
	for _, tc := range []struct{ table, election, want string }{
		{"", "", "fence_epoch"},
		{"", "default", "fence_epoch"},
		{"", "db-primary", "fence_epoch_db_primary"},
		{"jobs_fence", "db-primary", "jobs_fence"},
	} {
		f := &SQL{DB: &sql.DB{}, Dialect: Postgres, Table: tc.table, Election: tc.election}
		if got, err := f.table(); err != nil || got != tc.want {
			t.Errorf("table of %+v = %q, %v; want %q", tc, got, err, tc.want)
		}
	}
	if _, err := (&SQL{DB: &sql.DB{}, Dialect: Postgres, Election: "x; DROP TABLE jobs"}).table(); err == nil {
		t.Error("an election name that is no identifier made a table name")
	}
}
