package fence

import (
	"context"
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
