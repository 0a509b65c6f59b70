package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/localapi"
)

// namedBackend runs named elections, answering for the one each request's
// context names, as the agent does.
type namedBackend struct {
	mu     sync.Mutex
	byName map[string]*namedElection
}

type namedElection struct {
	status  api.Status
	resigns int
	maint   bool
	voters  []string
}

func (b *namedBackend) get(ctx context.Context) (*namedElection, error) {
	name := localapi.ElectionFrom(ctx)
	e, ok := b.byName[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, localapi.ErrNoElection)
	}
	return e, nil
}

func (b *namedBackend) Status(ctx context.Context, _ bool) (api.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.get(ctx)
	if err != nil {
		return api.Status{}, err
	}
	return e.status, nil
}

func (b *namedBackend) Members(context.Context) ([]api.Member, error) {
	return []api.Member{{Name: "n1", ID: 1, State: api.StateAlive}}, nil
}

func (b *namedBackend) Health(context.Context) error { return nil }

func (b *namedBackend) Resign(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.get(ctx)
	if err != nil {
		return err
	}
	if e.status.Role != api.RoleLeader {
		return fmt.Errorf("resign: %w", localapi.ErrNotLeader)
	}
	e.resigns++
	return nil
}

func (b *namedBackend) SetMaint(ctx context.Context, on bool, _ string) (api.MaintResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.get(ctx)
	if err != nil {
		return api.MaintResult{}, err
	}
	e.maint = on
	return api.MaintResult{Maintenance: on}, nil
}

func (b *namedBackend) Voters(ctx context.Context) (api.Voters, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.get(ctx)
	if err != nil {
		return api.Voters{}, err
	}
	return api.Voters{Index: uint64(len(e.voters)), Voters: slices.Clone(e.voters)}, nil
}

func (b *namedBackend) ChangeVoters(ctx context.Context, c api.VoterChange) (api.Voters, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.get(ctx)
	if err != nil {
		return api.Voters{}, err
	}
	if c.Add != "" {
		e.voters = append(e.voters, c.Add)
	}
	if c.Remove != "" {
		e.voters = slices.DeleteFunc(e.voters, func(v string) bool { return v == c.Remove })
	}
	return api.Voters{Index: uint64(len(e.voters)), Voters: slices.Clone(e.voters)}, nil
}

func (b *namedBackend) Elections(context.Context) ([]api.Election, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []api.Election
	for _, e := range b.byName {
		out = append(out, api.Election{Status: e.status})
	}
	return out, nil
}

func (b *namedBackend) election(name string) namedElection {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.byName[name]
}

// startNamed serves a namedBackend with elections default (n2 leads) and
// db (this node leads) through the real server on a real socket.
func startNamed(t *testing.T) (*namedBackend, *localapi.Hub, string) {
	t.Helper()
	def := status(3, api.RoleFollower, "n2")
	db := status(9, api.RoleLeader, "n1")
	db.Election = "db"
	be := &namedBackend{byName: map[string]*namedElection{
		api.DefaultElection: {status: def, voters: []string{"n1", "n2", "n3"}},
		"db":                {status: db, voters: []string{"n1"}},
	}}
	hub := localapi.NewHub(0)
	hub.Publish(def)
	hub.PublishTo("db", db)
	socket := serve(t, func() (http.Handler, func()) {
		srv, err := localapi.New(localapi.Options{Backend: be, Hub: hub})
		if err != nil {
			t.Fatal(err)
		}
		return srv, func() {
			hub.Close()
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	return be, hub, socket
}

// serve answers on a fresh Unix socket with the handler mk makes until the
// test ends; stop (from mk) runs first.
func serve(t *testing.T, mk func() (http.Handler, func())) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cl") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	h, stop := mk()
	hs := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		stop()
		if err := hs.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	return socket
}

func TestElectionClientActsOnItsElection(t *testing.T) {
	be, hub, socket := startNamed(t)
	ctx := context.Background()
	c := newClient(t, socket)
	db := c.Election("db")
	if db.ElectionName() != "db" || c.ElectionName() != api.DefaultElection || db.Socket() != c.Socket() {
		t.Errorf("names %q and %q, sockets %q and %q", db.ElectionName(), c.ElectionName(), db.Socket(), c.Socket())
	}

	if st, err := db.Status(ctx); err != nil || st != be.election("db").status {
		t.Errorf("db.Status = %+v, %v; want db's", st, err)
	}
	if st, err := c.Status(ctx); err != nil || st != be.election(api.DefaultElection).status {
		t.Errorf("Status = %+v, %v; want the default election's", st, err)
	}
	if st, err := c.Election(api.DefaultElection).ConsistentStatus(ctx); err != nil || st.Election != api.DefaultElection {
		t.Errorf("default by name: %+v, %v", st, err)
	}
	if l, err := db.Leader(ctx, 0, 0); err != nil || l.Epoch != 9 || !l.IsSelf {
		t.Errorf("db.Leader = %+v, %v; want this node in epoch 9", l, err)
	}

	// Writes reach db alone: it leads there, not in the default election.
	if err := db.Resign(ctx); err != nil {
		t.Errorf("db.Resign: %v", err)
	}
	if err := c.Resign(ctx); !errors.Is(err, client.ErrNotLeader) {
		t.Errorf("Resign of the default election: %v, want ErrNotLeader", err)
	}
	if _, err := db.Maint(ctx, true, "disk swap"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddVoter(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Voters(ctx); err != nil || !slices.Equal(v.Voters, []string{"n1", "n2"}) {
		t.Errorf("db.Voters = %+v, %v", v, err)
	}
	if got, def := be.election("db"), be.election(api.DefaultElection); got.resigns != 1 || !got.maint || def.maint || len(def.voters) != 3 {
		t.Errorf("db: %d resigns, maint %v; default: maint %v, voters %v; want the writes on db alone", got.resigns, got.maint, def.maint, def.voters)
	}
	// The agent's own endpoints answer through any election's client.
	if ms, err := db.Members(ctx); err != nil || len(ms) != 1 {
		t.Errorf("db.Members = %+v, %v", ms, err)
	}

	// db's watch streams db's changes and none of the default's.
	w, err := db.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if st, err := w.Next(); err != nil || st.Election != "db" || st.Epoch != 9 {
		t.Fatalf("first line %+v, %v", st, err)
	}
	hub.Publish(status(4, api.RoleFollower, "n3"))
	next := status(10, api.RoleFollower, "n2")
	next.Election = "db"
	hub.PublishTo("db", next)
	if st, err := w.Next(); err != nil || st != next {
		t.Errorf("next line %+v, %v; want db's epoch 10", st, err)
	}

	list, err := c.Elections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Election)
	}
	if !slices.Equal(names, []string{"db", api.DefaultElection}) {
		t.Errorf("Elections: %q, want db and default", names)
	}
}

func TestUnknownAndInvalidElection(t *testing.T) {
	_, _, socket := startNamed(t)
	ctx := context.Background()
	c := newClient(t, socket)
	nope := c.Election("nope")
	_, err := nope.Status(ctx)
	var ae *client.Error
	if !errors.Is(err, client.ErrNoElection) || !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound ||
		!strings.Contains(ae.Message, `no election "nope"`) || !strings.Contains(ae.Message, "agent elections") {
		t.Errorf("Status of an unknown election: %v; want a 404 matching ErrNoElection that says how to list them", err)
	}
	if _, err := nope.Watch(ctx); !errors.Is(err, client.ErrNoElection) {
		t.Errorf("Watch of an unknown election: %v", err)
	}
	if err := nope.Resign(ctx); !errors.Is(err, client.ErrNoElection) || errors.Is(err, client.ErrNotLeader) {
		t.Errorf("Resign of an unknown election: %v", err)
	}
	if _, err := c.Status(ctx); errors.Is(err, client.ErrNoElection) {
		t.Errorf("the default election reported unknown: %v", err)
	}

	// A bad name never reaches the socket: here none answers.
	bad := client.New(filepath.Join(t.TempDir(), "none.sock")).Election("Bad/Name")
	for name, call := range map[string]func() error{
		"Status": func() error { _, err := bad.Status(ctx); return err },
		"Leader": func() error { _, err := bad.Leader(ctx, 0, 0); return err },
		"Watch":  func() error { _, err := bad.Watch(ctx); return err },
		"Resign": func() error { return bad.Resign(ctx) },
		"Maint":  func() error { _, err := bad.Maint(ctx, true, ""); return err },
		"Voters": func() error { _, err := bad.AddVoter(ctx, "n4"); return err },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "invalid election name") || strings.Contains(err.Error(), "is the agent running") {
			t.Errorf("%s with a bad name: %v; want the name refused before dialling", name, err)
		}
	}
}

// TestElectionsFromAnOlderAgent: an agent from before named elections has
// no /v1/elections; its one election is the default, from /v1/status.
func TestElectionsFromAnOlderAgent(t *testing.T) {
	socket := serve(t, func() (http.Handler, func()) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentTypeJSON)
			if r.URL.Path == api.PathStatus {
				fmt.Fprintln(w, `{"node":"n1","id":1,"protocol":"bully","role":"leader","leader":"n1","epoch":5}`)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":"no such endpoint %q"}`+"\n", r.URL.Path)
		}), func() {}
	})
	c := newClient(t, socket)
	list, err := c.Elections(context.Background())
	if err != nil || len(list) != 1 || list[0].Election != api.DefaultElection || list[0].Epoch != 5 || list[0].Protocol != "bully" {
		t.Errorf("Elections from an older agent: %+v, %v; want its status as the default election", list, err)
	}
	if _, err := c.Election("db").Status(context.Background()); errors.Is(err, client.ErrNoElection) {
		t.Errorf("an older agent's 404 for an endpoint taken for an unknown election: %v", err)
	}
}
