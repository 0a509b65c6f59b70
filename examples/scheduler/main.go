// Command scheduler is an example singleton job scheduler fenced by the
// agent's epoch: run one replica beside every agent; the replica whose
// agent leads enqueues one job per second into a shared database — a
// SQLite file (-db), or PostgreSQL (-postgres DSN) — and every other
// replica waits.
//
// Each job row carries the (schedule, tick) pair, tick being the unix
// second it is for, under a UNIQUE key, so two leaders racing for the same
// tick collide; and the epoch of the leader that wrote it. With -fence (the
// default) the leader first raises the database's epoch to its own
// (fence.SQL.Raise) and writes every job in a transaction that checks the
// epoch is still its own (fence.SQL.Do): a replica that was paused, wakes
// up and still believes it leads has its first write refused, and exits.
//
// On loss of leadership the replica exits at once with status 3 (to be
// restarted as a follower by its supervisor or by `agent exec`); when its
// agent cannot be reached, with status 4. It prints one JSON line per event
// on standard output (the chaos harness reads them).
//
// -fence=false turns the check off and -unique=false drops the UNIQUE key:
// that is the chaos harness's control run, which must see stale and
// duplicate jobs. Never run them so in production.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/fence"
)

// Exit statuses.
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitLost       = 3 // leadership lost or fenced off: restart as follower
	exitAgentError = 4 // the agent cannot be reached
)

// Event is one line of the scheduler's standard output.
type Event struct {
	// TS is the wall-clock time in unix nanoseconds.
	TS int64 `json:"ts"`
	// Ev is "start", "follower", "leader", "raise", "write", "lost" or "exit".
	Ev string `json:"ev"`
	// Node is the agent's node name.
	Node string `json:"node,omitempty"`
	// Epoch is the epoch the replica acts in.
	Epoch uint64 `json:"epoch,omitempty"`
	// Tick is the unix second of a write.
	Tick int64 `json:"tick,omitempty"`
	// Result of a write or raise: "accepted", "stale", "duplicate",
	// "not_raised" or "error".
	Result string `json:"result,omitempty"`
	// Err is the error text, if any.
	Err string `json:"err,omitempty"`
	// Call is when a raise or write began (wall clock, unix nanoseconds);
	// TS is when it ended, so a checker knows the interval in which it
	// took effect.
	Call int64 `json:"call,omitempty"`
}

type scheduler struct {
	c        *client.Client
	db       *sql.DB
	f        *fence.SQL
	schedule string
	fenced   bool

	outMu sync.Mutex
	out   io.Writer
	node  string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", api.DefaultSocketPath(), "agent socket")
	dbPath := fs.String("db", "jobs.db", "SQLite database shared by all replicas")
	pgDSN := fs.String("postgres", "", "PostgreSQL DSN (e.g. \"host=/run/postgresql dbname=jobs\"): use it instead of -db")
	schedule := fs.String("schedule", "every-second", "schedule id, part of the UNIQUE key")
	fenced := fs.Bool("fence", true, "check the epoch in every write (false: control runs only)")
	unique := fs.Bool("unique", true, "UNIQUE (schedule, tick) when creating the table (false: control runs only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dialect, db, err := fence.SQLite, (*sql.DB)(nil), error(nil)
	if *pgDSN != "" {
		dialect = fence.Postgres
		db, err = openPostgres(ctx, *pgDSN, *unique)
	} else {
		db, err = openDB(ctx, *dbPath, *unique)
	}
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitError
	}
	defer db.Close()
	s := &scheduler{
		c: client.New(*socket), db: db, schedule: *schedule, fenced: *fenced, out: stdout,
		f: &fence.SQL{DB: db, Dialect: dialect},
	}
	defer s.c.Close()
	if err := s.f.Init(ctx); err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitError
	}
	code := s.run(ctx)
	s.emit(Event{Ev: "exit", Result: fmt.Sprint(code)})
	return code
}

// openDB opens the shared database and creates the jobs table. WAL and a
// busy timeout let replicas in several processes take turns.
func openDB(ctx context.Context, path string, unique bool) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	key := ", UNIQUE (schedule, tick)"
	if !unique {
		key = ""
	}
	q := `CREATE TABLE IF NOT EXISTS jobs (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		schedule TEXT NOT NULL,
		tick INTEGER NOT NULL,
		epoch INTEGER NOT NULL,
		node TEXT NOT NULL,
		at_ns INTEGER NOT NULL` + key + `)`
	if _, err := db.ExecContext(ctx, q); err != nil {
		db.Close()
		return nil, fmt.Errorf("create jobs table in %s: %w", path, err)
	}
	return db, nil
}

// openPostgres connects to PostgreSQL (pgx) and creates the jobs table.
// The pool is small: one replica writes once a second.
func openPostgres(ctx context.Context, dsn string, unique bool) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(4)
	key := ", UNIQUE (schedule, tick)"
	if !unique {
		key = ""
	}
	q := `CREATE TABLE IF NOT EXISTS jobs (
		seq BIGSERIAL PRIMARY KEY,
		schedule TEXT NOT NULL,
		tick BIGINT NOT NULL,
		epoch BIGINT NOT NULL,
		node TEXT NOT NULL,
		at_ns BIGINT NOT NULL` + key + `)`
	if _, err := db.ExecContext(ctx, q); err != nil {
		db.Close()
		return nil, fmt.Errorf("create jobs table in postgres: %w", err)
	}
	return db, nil
}

func (s *scheduler) emit(e Event) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if e.TS == 0 {
		e.TS = time.Now().UnixNano()
	}
	if e.Node == "" {
		e.Node = s.node
	}
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	_, _ = s.out.Write(b)
}

// run waits to lead, then schedules until leadership is lost.
func (s *scheduler) run(ctx context.Context) int {
	w, err := s.c.Watch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		s.emit(Event{Ev: "lost", Err: err.Error()})
		return exitAgentError
	}
	defer w.Close()
	s.emit(Event{Ev: "start"})
	var st api.Status
	for {
		st, err = w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			s.emit(Event{Ev: "lost", Err: err.Error()})
			return exitAgentError
		}
		s.node = st.Node
		if st.IsLeader() {
			break
		}
		s.emit(Event{Ev: "follower", Epoch: st.Epoch})
	}
	epoch := st.Epoch
	s.emit(Event{Ev: "leader", Epoch: epoch})

	// The watch runs beside the ticks: any change away from "leader in
	// this epoch" ends the process at once, whatever the tick loop does.
	lost := make(chan int, 1)
	go func() {
		for {
			st, err := w.Next()
			if err != nil {
				if ctx.Err() == nil {
					s.emit(Event{Ev: "lost", Epoch: epoch, Err: err.Error()})
				}
				lost <- exitAgentError
				return
			}
			if !st.IsLeader() || st.Epoch != epoch {
				s.emit(Event{Ev: "lost", Epoch: epoch, Err: fmt.Sprintf("agent says role=%s epoch=%d", st.Role, st.Epoch)})
				lost <- exitLost
				return
			}
		}
	}()

	if s.fenced {
		call := time.Now().UnixNano()
		if err := s.f.Raise(ctx, epoch); err != nil {
			res := "error"
			if errors.Is(err, fence.ErrStale) {
				res = "stale"
			}
			s.emit(Event{Ev: "raise", Epoch: epoch, Result: res, Err: err.Error(), Call: call})
			return exitLost
		}
		s.emit(Event{Ev: "raise", Epoch: epoch, Result: "accepted", Call: call})
	}

	timer := time.NewTimer(time.Until(nextSecond(time.Now())))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case code := <-lost:
			return code
		case <-timer.C:
		}
		now := time.Now()
		tick := now.Unix()
		res, err := s.write(ctx, epoch, tick)
		e := Event{Ev: "write", Epoch: epoch, Tick: tick, Result: res, Call: now.UnixNano()}
		if err != nil {
			e.Err = err.Error()
		}
		s.emit(e)
		if res == "stale" || res == "not_raised" {
			return exitLost
		}
		timer.Reset(time.Until(nextSecond(time.Now())))
	}
}

func nextSecond(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second)
}

// write enqueues the job of one tick and says what became of it.
func (s *scheduler) write(ctx context.Context, epoch uint64, tick int64) (string, error) {
	q := "INSERT INTO jobs (schedule, tick, epoch, node, at_ns) VALUES (?, ?, ?, ?, ?)"
	if s.f.Dialect == fence.Postgres {
		q = "INSERT INTO jobs (schedule, tick, epoch, node, at_ns) VALUES ($1, $2, $3, $4, $5)"
	}
	insert := func(tx fence.Tx) error {
		_, err := tx.ExecContext(ctx, q, s.schedule, tick, epoch, s.node, time.Now().UnixNano())
		return err
	}
	var err error
	if s.fenced {
		err = s.f.Do(ctx, epoch, insert)
	} else {
		err = insert(s.db)
	}
	switch {
	case err == nil:
		return "accepted", nil
	case errors.Is(err, fence.ErrStale):
		return "stale", err
	case errors.Is(err, fence.ErrNotRaised):
		return "not_raised", err
	case isUniqueViolation(err):
		// Another leader already enqueued this tick: nothing to do.
		return "duplicate", err
	}
	return "error", fmt.Errorf("enqueue tick %d: %w", tick, err)
}

// isUniqueViolation tells whether err is the UNIQUE (schedule, tick) key
// refusing a second job: PostgreSQL's SQLSTATE 23505, or SQLite's message
// (modernc.org/sqlite has no exported error code type worth importing).
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}
