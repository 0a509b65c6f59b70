package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
)

// electionsBackend runs named elections: each request acts on the
// election its context names (ElectionFrom), as the agent's backend must.
type electionsBackend struct {
	mu        sync.Mutex
	elections map[string]*electionState
	calls     int // every call that reached the backend
}

type electionState struct {
	status  api.Status
	resigns int
	maint   bool
	voters  []string
}

var _ ElectionsBackend = (*electionsBackend)(nil)

func newElectionsBackend(names ...string) *electionsBackend {
	b := &electionsBackend{elections: map[string]*electionState{}}
	for i, n := range names {
		b.elections[n] = &electionState{
			status: api.Status{Election: n, Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleFollower, Leader: "n2", Epoch: uint64(10 * (i + 1))},
			voters: []string{"n1", "n2", "n3"},
		}
	}
	return b
}

// of returns the election ctx names, or an error wrapping ErrNoElection.
func (b *electionsBackend) of(ctx context.Context) (*electionState, error) {
	b.calls++
	name := ElectionFrom(ctx)
	e, ok := b.elections[name]
	if !ok {
		return nil, fmt.Errorf("election %q: %w", name, ErrNoElection)
	}
	return e, nil
}

func (b *electionsBackend) Status(ctx context.Context, consistent bool) (api.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.of(ctx)
	if err != nil {
		return api.Status{}, err
	}
	st := e.status
	if consistent {
		st.Seq = 1 // marks a consistent answer for the test
	}
	return st, nil
}

func (b *electionsBackend) Members(context.Context) ([]api.Member, error) { return nil, nil }
func (b *electionsBackend) Health(context.Context) error                  { return nil }

func (b *electionsBackend) Resign(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.of(ctx)
	if err != nil {
		return err
	}
	e.resigns++
	return nil
}

// OpenSession refuses: no election of this fake stands by sessions.
func (b *electionsBackend) OpenSession(ctx context.Context) (Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.of(ctx); err != nil {
		return Session{}, err
	}
	return Session{}, ErrNoSessions
}

func (b *electionsBackend) KeepSession(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.of(ctx); err != nil {
		return err
	}
	return ErrSessionEnded
}

func (b *electionsBackend) CloseSession(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.of(ctx)
	return err
}

func (b *electionsBackend) SetMaint(ctx context.Context, on bool, reason string) (api.MaintResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.of(ctx)
	if err != nil {
		return api.MaintResult{}, err
	}
	e.maint = on
	return api.MaintResult{Maintenance: on}, nil
}

func (b *electionsBackend) Voters(ctx context.Context) (api.Voters, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.of(ctx)
	if err != nil {
		return api.Voters{}, err
	}
	return api.Voters{Index: 1, Voters: slices.Clone(e.voters)}, nil
}

func (b *electionsBackend) ChangeVoters(ctx context.Context, c api.VoterChange) (api.Voters, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.of(ctx)
	if err != nil {
		return api.Voters{}, err
	}
	e.voters = append(e.voters, c.Add)
	return api.Voters{Index: 2, Voters: slices.Clone(e.voters)}, nil
}

// Elections lists them unsorted, with default's name left out: the server
// sorts and names.
func (b *electionsBackend) Elections(context.Context) ([]api.Election, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	var out []api.Election
	for n, e := range b.elections {
		st := e.status
		if n == api.DefaultElection {
			st.Election = ""
		}
		out = append(out, api.Election{Status: st})
	}
	return out, nil
}

func (b *electionsBackend) state(name string) electionState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.elections[name]
}

func (b *electionsBackend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

func startElectionsServer(t *testing.T, names ...string) (*testServer, *electionsBackend) {
	t.Helper()
	be := newElectionsBackend(names...)
	return startServer(t, nil, Options{Backend: be}), be
}

// TestElectionPathsReachTheirElection: every per-election endpoint under
// /v1/elections/NAME acts on NAME and on nothing else; the unprefixed
// paths and /v1/elections/default act on the default election.
func TestElectionPathsReachTheirElection(t *testing.T) {
	ts, be := startElectionsServer(t, api.DefaultElection, "db", "cron")

	for _, tc := range []struct {
		path, election string
	}{
		{api.PathStatus, api.DefaultElection},
		{api.PathElections + "/default/status", api.DefaultElection},
		{api.ElectionPath("db", api.PathStatus), "db"},
		{api.ElectionPath("cron", api.PathStatus), "cron"},
	} {
		var st api.Status
		if resp := ts.do(t, http.MethodGet, tc.path, &st); resp.StatusCode != http.StatusOK || st.Election != tc.election || st != be.state(tc.election).status {
			t.Errorf("GET %s: %d %+v, want election %s's status", tc.path, resp.StatusCode, st, tc.election)
		}
	}
	var st api.Status
	ts.do(t, http.MethodGet, api.ElectionPath("db", api.PathStatus)+"?consistent", &st)
	if st.Election != "db" || st.Seq != 1 {
		t.Errorf("consistent status of db: %+v; the query must reach the backend", st)
	}
	var l api.Leader
	if resp := ts.do(t, http.MethodGet, api.ElectionPath("cron", api.PathLeader), &l); resp.StatusCode != http.StatusOK || l.Epoch != be.state("cron").status.Epoch {
		t.Errorf("GET cron's leader: %d %+v, want epoch %d", resp.StatusCode, l, be.state("cron").status.Epoch)
	}

	if resp := ts.do(t, http.MethodPost, api.ElectionPath("db", api.PathResign), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("resign db: %d", resp.StatusCode)
	}
	if resp := ts.do(t, http.MethodPost, api.ElectionPath("cron", api.PathMaint)+"?enable=true", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("maint cron: %d", resp.StatusCode)
	}
	if db, cron, def := be.state("db"), be.state("cron"), be.state(api.DefaultElection); db.resigns != 1 || cron.resigns != 0 || def.resigns != 0 ||
		!cron.maint || db.maint || def.maint {
		t.Errorf("resign reached db %d, cron %d, default %d times (want 1, 0, 0); maint on db %v, cron %v, default %v (want only cron)",
			db.resigns, cron.resigns, def.resigns, db.maint, cron.maint, def.maint)
	}

	req, err := http.NewRequest(http.MethodPost, "http://"+api.Host+api.ElectionPath("db", api.PathVoters), strings.NewReader(`{"add":"n4"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var v api.Voters
	ts.do(t, http.MethodGet, api.ElectionPath("db", api.PathVoters), &v)
	var dv api.Voters
	ts.do(t, http.MethodGet, api.PathVoters, &dv)
	if resp.StatusCode != http.StatusOK || !slices.Contains(v.Voters, "n4") || slices.Contains(dv.Voters, "n4") {
		t.Errorf("voter change on db: %d; db's voters %v, default's %v; want n4 in db's only", resp.StatusCode, v.Voters, dv.Voters)
	}

	// GET /v1/elections lists them all, sorted, each named.
	var list []api.Election
	if resp := ts.do(t, http.MethodGet, api.PathElections, &list); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", api.PathElections, resp.StatusCode)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Election)
		if want := be.state(e.Election).status; e.Status != want {
			t.Errorf("list item %+v, want %+v", e.Status, want)
		}
	}
	if !slices.Equal(names, []string{"cron", "db", "default"}) {
		t.Errorf("elections listed %q, want cron, db, default", names)
	}

	// The metrics count each endpoint once, whatever the name.
	labels := map[string]bool{}
	for _, c := range ts.srv.RequestCounts() {
		labels[c.Path] = true
		if strings.Contains(c.Path, "db") || strings.Contains(c.Path, "cron") {
			t.Errorf("request counter labelled with an election's name: %+v", c)
		}
	}
	if !labels[api.PathElections+"/{name}/status"] || !labels[api.PathElections] {
		t.Errorf("request counter labels %v lack the election endpoints", labels)
	}
}

// TestUnknownAndBadElections: an election the agent does not run is a 404
// that says how to list them, from every endpoint; a name that cannot be
// one is a 400 that never reaches the backend; the agent's own endpoints
// are not an election's.
func TestUnknownAndBadElections(t *testing.T) {
	ts, be := startElectionsServer(t, api.DefaultElection, "db")
	for _, p := range api.ElectionPaths() {
		method := http.MethodGet
		if p == api.PathResign || p == api.PathMaint || p == api.PathCampaign || p == api.PathHeartbeat {
			method = http.MethodPost
		}
		path := api.ElectionPath("nope", p)
		switch p {
		case api.PathMaint:
			path += "?enable=true"
		case api.PathHeartbeat:
			path += "?session=s"
		}
		msg := ts.expectError(t, method, path, http.StatusNotFound)
		if !strings.Contains(msg, `no election "nope" on this agent`) || !strings.Contains(msg, "agent elections") {
			t.Errorf("%s %s: %q; want it to name the election and how to list them", method, path, msg)
		}
	}
	before := be.callCount()
	for _, path := range []string{
		api.PathElections + "/Db/status",
		api.PathElections + "/1db/leader",
		api.PathElections + "/d.b/watch",
		api.PathElections + "/" + strings.Repeat("x", api.MaxElectionName+1) + "/resign",
	} {
		method := http.MethodGet
		if strings.HasSuffix(path, "/resign") {
			method = http.MethodPost
		}
		if msg := ts.expectError(t, method, path, http.StatusBadRequest); !strings.Contains(msg, "invalid election name") {
			t.Errorf("%s: %q; want it to say the name is invalid", path, msg)
		}
	}
	if got := be.callCount(); got != before {
		t.Errorf("bad names reached the backend %d times", got-before)
	}
	if msg := ts.expectError(t, http.MethodGet, api.PathElections+"/db/members", http.StatusNotFound); !strings.Contains(msg, "belongs to the agent") || !strings.Contains(msg, api.PathMembers) {
		t.Errorf("members under an election: %q; want a pointer to %s", msg, api.PathMembers)
	}
	if msg := ts.expectError(t, http.MethodGet, api.PathElections+"/db/frobnicate", http.StatusNotFound); !strings.Contains(msg, "status, leader, watch") {
		t.Errorf("unknown endpoint under an election: %q; want the endpoints an election answers", msg)
	}
	ts.expectError(t, http.MethodGet, api.PathElections+"/db", http.StatusNotFound)
	ts.expectError(t, http.MethodPost, api.PathElections, http.StatusMethodNotAllowed)
	ts.expectError(t, http.MethodGet, api.ElectionPath("db", api.PathResign), http.StatusMethodNotAllowed)
	ts.mustBeHealthy(t)
}

// TestElectionsWithoutNamedBackend: a backend that runs only the default
// election (it does not implement ElectionsBackend) is never asked about
// another name, and lists its one election.
func TestElectionsWithoutNamedBackend(t *testing.T) {
	ts := startServer(t, nil, Options{})
	ts.be.set(func(b *fakeBackend) { b.status.Election = "" }) // a backend from before named elections
	var list []api.Election
	if resp := ts.do(t, http.MethodGet, api.PathElections, &list); resp.StatusCode != http.StatusOK || len(list) != 1 ||
		list[0].Election != api.DefaultElection || list[0].Node != "n1" {
		t.Fatalf("GET %s: %d %+v, want the default election alone", api.PathElections, resp.StatusCode, list)
	}
	var st api.Status
	if resp := ts.do(t, http.MethodGet, api.PathElections+"/default/status", &st); resp.StatusCode != http.StatusOK || st.Election != api.DefaultElection {
		t.Errorf("default's status by name: %d %+v; want it named default", resp.StatusCode, st)
	}
	ts.do(t, http.MethodGet, api.PathStatus, &st)
	if st.Election != api.DefaultElection {
		t.Errorf("status %+v does not name its election", st)
	}
	if msg := ts.expectError(t, http.MethodPost, api.ElectionPath("db", api.PathResign), http.StatusNotFound); !strings.Contains(msg, `no election "db"`) {
		t.Errorf("resign of db: %q", msg)
	}
	ts.be.mu.Lock()
	resigns := ts.be.resigns
	ts.be.mu.Unlock()
	if resigns != 0 {
		t.Errorf("a backend without named elections resigned %d times for another election", resigns)
	}
}

// TestWatchPerElection: a watcher of one election sees its changes and
// none of another's; the stream of an election the agent does not run is
// a 404; dropping an election ends its streams with a reason.
func TestWatchPerElection(t *testing.T) {
	ts, _ := startElectionsServer(t, api.DefaultElection, "db")
	ts.hub.PublishTo("db", api.Status{Election: "db", Epoch: 1})
	ts.hub.Publish(api.Status{Epoch: 100}) // a backend that does not name it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, db := ts.watchPath(t, ctx, api.ElectionPath("db", api.PathWatch))
	_, def := ts.watchPath(t, ctx, api.PathWatch)
	if l := nextLine(t, db); l.Election != "db" || l.Epoch != 1 {
		t.Fatalf("db's first line %+v", l)
	}
	if l := nextLine(t, def); l.Election != api.DefaultElection || l.Epoch != 100 {
		t.Fatalf("default's first line %+v, want epoch 100 named default", l)
	}
	// Changes to the default election, then one to db: db's next line is
	// db's change, so none of default's reached it (lines keep their order).
	ts.hub.Publish(api.Status{Epoch: 101})
	ts.hub.Publish(api.Status{Epoch: 102})
	ts.hub.PublishTo("db", api.Status{Election: "db", Epoch: 2})
	if l := nextLine(t, db); l.Election != "db" || l.Epoch != 2 {
		t.Errorf("db's next line %+v, want db's epoch 2", l)
	}
	for _, want := range []uint64{101, 102} {
		if l := nextLine(t, def); l.Epoch != want || l.Election != api.DefaultElection {
			t.Errorf("default's line %+v, want epoch %d", l, want)
		}
	}
	ts.hub.Drop("db")
	if l := nextLine(t, db); !strings.Contains(l.Error, "no longer runs this election") {
		t.Errorf("db's last line %+v, want the drop's reason", l)
	}
	ts.expectError(t, http.MethodGet, api.ElectionPath("nope", api.PathWatch), http.StatusNotFound)
}

// watchPath opens the NDJSON stream at path.
func (ts *testServer) watchPath(t *testing.T, ctx context.Context, path string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return resp, bufio.NewScanner(resp.Body)
}

// TestBlockingLeaderPerElection: a blocking leader query of one election
// waits for that election's epoch to pass the index, and a change of the
// default election does not answer it.
func TestBlockingLeaderPerElection(t *testing.T) {
	ts, be := startElectionsServer(t, api.DefaultElection, "db")
	index := be.state("db").status.Epoch
	before := be.callCount()
	type answer struct {
		l   api.Leader
		err error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		resp, err := ts.client.Get(fmt.Sprintf("http://%s%s?index=%d&wait=1m", api.Host, api.ElectionPath("db", api.PathLeader), index))
		if err == nil {
			a.err = json.NewDecoder(resp.Body).Decode(&a.l)
			resp.Body.Close()
		}
		if err != nil {
			a.err = err
		}
		got <- a
	}()
	// Once the query has asked the backend, it is waiting on db's stream.
	for be.callCount() == before {
		runtime.Gosched()
	}
	ts.hub.Publish(api.Status{Epoch: index + 5}) // the default election's
	be.mu.Lock()
	be.elections["db"].status.Epoch = index + 1
	be.elections["db"].status.Leader = "n3"
	be.mu.Unlock()
	ts.hub.PublishTo("db", be.state("db").status)
	if a := <-got; a.err != nil || a.l.Epoch != index+1 || a.l.Leader != "n3" {
		t.Errorf("blocking leader of db: %+v, %v; want n3 in epoch %d", a.l, a.err, index+1)
	}
}

// TestHubElectionsAreSeparate: publishing to one election neither wakes
// nor feeds another's watchers; Drop ends only its own.
func TestHubElectionsAreSeparate(t *testing.T) {
	h := NewHub(4)
	defer h.Close()
	db := h.SubscribeTo("db")
	defer db.Close()
	def := h.Subscribe()
	defer def.Close()
	// Both topics exist now: a new one wakes every waiter once.
	dbWake, _ := h.wakeup("db")
	h.Publish(statusEpoch(1))
	select {
	case <-dbWake:
		t.Fatal("a change of the default election woke db's blocking queries")
	default:
	}
	if len(db.C()) != 0 {
		t.Fatalf("db's watcher got the default election's change: %+v", <-db.C())
	}
	h.PublishTo("db", api.Status{Election: "db", Epoch: 7})
	select {
	case <-dbWake:
	default:
		t.Error("a change of db did not wake db's blocking queries")
	}
	if got := recv(t, db); got.Epoch != 7 {
		t.Errorf("db's watcher got %+v", got)
	}
	if got := recv(t, def); got.Epoch != 1 || len(def.C()) != 0 {
		t.Errorf("default's watcher got %+v (and %d more)", got, len(def.C()))
	}
	if cur, ok := h.CurrentOf("db"); !ok || cur.Epoch != 7 {
		t.Errorf("CurrentOf(db) = %+v, %v", cur, ok)
	}
	if cur, ok := h.Current(); !ok || cur.Epoch != 1 {
		t.Errorf("Current() = %+v, %v", cur, ok)
	}
	if _, ok := h.CurrentOf("nope"); ok {
		t.Error("CurrentOf an election never published reports one")
	}
	if n := h.Watchers(); n != 2 {
		t.Errorf("Watchers() = %d, want 2 (both elections)", n)
	}
	h.Drop("db")
	if _, ok := <-db.C(); ok {
		t.Error("db's watcher not closed by Drop")
	}
	if !errors.Is(db.Err(), ErrElectionDropped) || def.Err() != nil || h.Watchers() != 1 {
		t.Errorf("after Drop(db): db %v, default %v, %d watchers", db.Err(), def.Err(), h.Watchers())
	}
	if _, ok := h.CurrentOf("db"); ok {
		t.Error("a dropped election keeps its status")
	}
}

func TestElectionContext(t *testing.T) {
	ctx := context.Background()
	if got := ElectionFrom(ctx); got != api.DefaultElection {
		t.Errorf("ElectionFrom(no election) = %q, want the default", got)
	}
	if got := ElectionFrom(WithElection(ctx, "db")); got != "db" {
		t.Errorf("ElectionFrom(WithElection(db)) = %q", got)
	}
	if got := statusFor(fmt.Errorf("x: %w", ErrNoElection)); got != http.StatusNotFound {
		t.Errorf("ErrNoElection → %d, want 404", got)
	}
	if !errors.Is(fmt.Errorf("status: %w", ErrNoElection), ErrNoElection) {
		t.Error("wrapped ErrNoElection not recognised")
	}
}

// TestHubMakesNoTopicForAName: asking about an election, known or not,
// leaves nothing behind, so a caller trying names cannot grow the hub; a
// query waiting on an election without a status yet wakes at its first.
func TestHubMakesNoTopicForAName(t *testing.T) {
	ts, _ := startElectionsServer(t, api.DefaultElection, "db")
	topics := func() int {
		ts.hub.mu.Lock()
		defer ts.hub.mu.Unlock()
		return len(ts.hub.topics)
	}
	for i := range 20 {
		name := fmt.Sprintf("x%d", i)
		ts.expectError(t, http.MethodGet, api.ElectionPath(name, api.PathLeader)+"?index=1&wait=1m", http.StatusNotFound)
		ts.expectError(t, http.MethodGet, api.ElectionPath(name, api.PathWatch), http.StatusNotFound)
	}
	if n := topics(); n != 0 {
		t.Errorf("%d topics after asking about elections never published, want 0", n)
	}

	h := NewHub(0)
	defer h.Close()
	waiting, _ := h.wakeup("db")
	w := h.SubscribeTo("cron")
	select {
	case <-waiting:
	default:
		t.Fatal("a new topic did not wake queries waiting for one")
	}
	waiting, _ = h.wakeup("db")
	h.PublishTo("db", api.Status{Election: "db", Epoch: 1})
	select {
	case <-waiting:
	default:
		t.Fatal("db's first status did not wake its waiting query")
	}
	cronWait, _ := h.wakeup("cron")
	w.Close()
	select {
	case <-cronWait:
	default:
		t.Error("forgetting cron's empty topic did not wake its waiting query")
	}
	h.mu.Lock()
	_, cron := h.topics["cron"]
	_, db := h.topics["db"]
	h.mu.Unlock()
	if cron || !db {
		t.Errorf("topics: cron %v, db %v; want db's alone (cron has no status and no watcher)", cron, db)
	}
}
