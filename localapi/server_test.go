package localapi

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/api"
)

func TestStatus(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var st api.Status
	resp := ts.do(t, http.MethodGet, api.PathStatus, &st)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeJSON {
		t.Fatalf("status: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if st != ts.be.status {
		t.Errorf("status = %+v, want %+v", st, ts.be.status)
	}
	// A protocol without consistent reads says so with a 400 and a reason.
	ts.be.set(func(b *fakeBackend) { b.consistentErr = fmt.Errorf("bully: %w", ErrConsistentUnsupported) })
	msg := ts.expectError(t, http.MethodGet, api.PathStatus+"?consistent", http.StatusBadRequest)
	if !strings.Contains(msg, "not supported") {
		t.Errorf("consistent error %q does not give the reason", msg)
	}
	ts.expectError(t, http.MethodGet, api.PathStatus+"?consistent=maybe", http.StatusBadRequest)
	// consistent=false is an ordinary read.
	if resp := ts.do(t, http.MethodGet, api.PathStatus+"?consistent=false", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("consistent=false: %d", resp.StatusCode)
	}
	ts.be.set(func(b *fakeBackend) { b.consistentErr = fmt.Errorf("%w: no quorum", ErrUnavailable) })
	ts.expectError(t, http.MethodGet, api.PathStatus+"?consistent=true", http.StatusServiceUnavailable)
}

func TestMembers(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var ms []api.Member
	ts.do(t, http.MethodGet, api.PathMembers, &ms)
	if ms == nil || len(ms) != 0 {
		t.Errorf("no members: got %#v, want []", ms)
	}
	ts.be.set(func(b *fakeBackend) {
		b.members = []api.Member{
			{Name: "n1", ID: 1, Addr: "127.0.0.1:7946", State: api.StateAlive},
			{Name: "n2", ID: 2, Addr: "127.0.0.1:7950", State: api.StateSuspect, Phi: math.Inf(1)},
			{Name: "n3", ID: 3, Addr: "127.0.0.1:7954", State: api.StateDead, Phi: math.NaN()},
		}
	})
	resp := ts.do(t, http.MethodGet, api.PathMembers, &ms)
	if resp.StatusCode != http.StatusOK || len(ms) != 3 {
		t.Fatalf("members: %d %+v", resp.StatusCode, ms)
	}
	if ms[1].Phi != api.MaxPhi || ms[2].Phi != 0 || ms[1].Name != "n2" {
		t.Errorf("non-finite phi not made JSON-safe: %+v", ms)
	}
}

func TestResign(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var r api.Resigned
	if resp := ts.do(t, http.MethodPost, api.PathResign, &r); resp.StatusCode != http.StatusOK || !r.Resigned {
		t.Errorf("resign: %d %+v", resp.StatusCode, r)
	}
	ts.be.set(func(b *fakeBackend) { b.resignErr = fmt.Errorf("majority: %w", ErrNotLeader) })
	if msg := ts.expectError(t, http.MethodPost, api.PathResign, http.StatusConflict); !strings.Contains(msg, "not the leader") {
		t.Errorf("409 message %q", msg)
	}
	ts.be.set(func(b *fakeBackend) { b.resignErr = errTest })
	ts.expectError(t, http.MethodPost, api.PathResign, http.StatusInternalServerError)
	// GET must not resign.
	resp := ts.do(t, http.MethodGet, api.PathResign, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET resign: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	ts.be.mu.Lock()
	defer ts.be.mu.Unlock()
	if ts.be.resigns != 3 {
		t.Errorf("backend Resign called %d times, want 3", ts.be.resigns)
	}
}

func TestHealth(t *testing.T) {
	ts := startServer(t, nil, Options{})
	ts.mustBeHealthy(t)
	ts.be.set(func(b *fakeBackend) { b.healthErr = fmt.Errorf("event loop stopped") })
	if msg := ts.expectError(t, http.MethodGet, api.PathHealth, http.StatusServiceUnavailable); !strings.Contains(msg, "event loop stopped") {
		t.Errorf("health error %q", msg)
	}
}

func TestRouting(t *testing.T) {
	ts := startServer(t, nil, Options{})
	ts.expectError(t, http.MethodGet, "/v1/nope", http.StatusNotFound)
	ts.expectError(t, http.MethodGet, "/", http.StatusNotFound)
	ts.expectError(t, http.MethodGet, api.PathMetrics, http.StatusNotFound) // no metrics handler
	ts.expectError(t, http.MethodPost, api.PathStatus, http.StatusMethodNotAllowed)
	ts.expectError(t, http.MethodDelete, api.PathWatch, http.StatusMethodNotAllowed)
	if resp := ts.do(t, http.MethodHead, api.PathStatus, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD status: %d", resp.StatusCode)
	}
	counts := map[string]uint64{}
	for _, c := range ts.srv.RequestCounts() {
		counts[fmt.Sprintf("%s %d", c.Path, c.Code)] = c.Count
	}
	// /metrics is unknown without a handler, so it counts as "other".
	want := map[string]uint64{"other 404": 3, "/v1/status 405": 1, "/v1/watch 405": 1, "/v1/status 200": 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("count[%s] = %d, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
}

func TestMetricsHandler(t *testing.T) {
	ts := startServer(t, nil, Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "conclave_up 1\n")
	})})
	resp, err := ts.client.Get("http://" + api.Host + api.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "conclave_up 1\n" {
		t.Errorf("metrics: %d %q", resp.StatusCode, b)
	}
}

func TestLeaderImmediate(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var l api.Leader
	ts.do(t, http.MethodGet, api.PathLeader, &l)
	if l != (api.Leader{Leader: "n2", Epoch: 1}) {
		t.Errorf("leader = %+v", l)
	}
	// An index already passed answers at once.
	ts.do(t, http.MethodGet, api.PathLeader+"?index=0&wait=5m", &l)
	if l.Epoch != 1 {
		t.Errorf("index=0: %+v", l)
	}
	ts.be.set(func(b *fakeBackend) { b.status.Role, b.status.Leader = api.RoleLeader, "n1" })
	ts.do(t, http.MethodGet, api.PathLeader, &l)
	if !l.IsSelf || l.Leader != "n1" {
		t.Errorf("self leader = %+v", l)
	}
}

func TestLeaderBadParams(t *testing.T) {
	ts := startServer(t, nil, Options{})
	for _, q := range []string{"index=abc", "index=-1", "index=1&wait=soon", "index=1&wait=-1s", "index=99999999999999999999"} {
		ts.expectError(t, http.MethodGet, api.PathLeader+"?"+q, http.StatusBadRequest)
	}
}

func TestLeaderWaitElapses(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var l api.Leader
	resp := ts.do(t, http.MethodGet, api.PathLeader+"?index=1&wait=1ms", &l)
	if resp.StatusCode != http.StatusOK || l.Epoch != 1 {
		t.Errorf("after wait: %d %+v, want the current leader", resp.StatusCode, l)
	}
}

func TestLeaderBlocksUntilEpochChanges(t *testing.T) {
	calls := make(chan struct{}, 1)
	be := &fakeBackend{status: statusEpoch(5), statusCalls: calls}
	ts := startServer(t, be, Options{})
	ts.hub.Publish(statusEpoch(5))
	type result struct {
		l    api.Leader
		code int
	}
	done := make(chan result, 1)
	go func() {
		var l api.Leader
		resp := ts.do(t, http.MethodGet, api.PathLeader+"?index=5&wait=5m", &l)
		done <- result{l, resp.StatusCode}
	}()
	<-calls // the request has looked at epoch 5 and is about to wait
	// A change that does not pass the index does not answer the query.
	ts.hub.Publish(api.Status{Node: "n1", Epoch: 5, Role: api.RoleCandidate})
	<-calls
	be.set(func(b *fakeBackend) { b.status = statusEpoch(6) })
	ts.hub.Publish(statusEpoch(6))
	r := <-done
	if r.code != http.StatusOK || r.l.Epoch != 6 || r.l.Leader != statusEpoch(6).Leader {
		t.Errorf("blocking leader: %d %+v, want epoch 6", r.code, r.l)
	}
}

func TestLeaderBlockingEndsOnShutdown(t *testing.T) {
	calls := make(chan struct{}, 1)
	be := &fakeBackend{status: statusEpoch(5), statusCalls: calls}
	ts := startServer(t, be, Options{})
	done := make(chan api.Leader, 1)
	go func() {
		var l api.Leader
		ts.do(t, http.MethodGet, api.PathLeader+"?index=5", &l)
		done <- l
	}()
	<-calls
	if err := ts.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := <-done; l.Epoch != 5 {
		t.Errorf("answer at shutdown: %+v, want the current leader", l)
	}
}

func TestLeaderBlockingEndsWhenHubCloses(t *testing.T) {
	calls := make(chan struct{}, 1)
	be := &fakeBackend{status: statusEpoch(5), statusCalls: calls}
	ts := startServer(t, be, Options{})
	done := make(chan api.Leader, 1)
	go func() {
		var l api.Leader
		ts.do(t, http.MethodGet, api.PathLeader+"?index=5&wait=5m", &l)
		done <- l
	}()
	<-calls
	ts.hub.Close()
	if l := <-done; l.Epoch != 5 {
		t.Errorf("answer when the hub closed: %+v", l)
	}
	// Later blocking queries answer at once too.
	var l api.Leader
	ts.do(t, http.MethodGet, api.PathLeader+"?index=5&wait=5m", &l)
	if l.Epoch != 5 {
		t.Errorf("blocking query on a closed hub: %+v", l)
	}
}

func TestWatch(t *testing.T) {
	ts := startServer(t, nil, Options{})
	ts.hub.Publish(statusEpoch(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, sc := ts.watch(t, ctx)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		t.Fatalf("watch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if l := nextLine(t, sc); l.Epoch != 1 || l.Error != "" {
		t.Fatalf("first line %+v, want the current status", l)
	}
	for e := uint64(2); e <= 4; e++ {
		ts.hub.Publish(statusEpoch(e))
		if l := nextLine(t, sc); l.Status != statusEpoch(e) {
			t.Fatalf("line %+v, want %+v", l.Status, statusEpoch(e))
		}
	}
	// The hub closing the stream (agent stopping) ends it with an error line.
	ts.hub.Close()
	if l := nextLine(t, sc); !strings.Contains(l.Error, "shutting down") {
		t.Errorf("final line %+v, want the shutdown error", l)
	}
	if sc.Scan() {
		t.Errorf("line after the final error: %q", sc.Text())
	}
}

// A client that stops reading cannot hold the publisher: its watcher lags,
// is closed, and the stream ends with an error line after what was sent.
func TestWatchLaggingClientIsClosed(t *testing.T) {
	hub := NewHub(1)
	ts := startServer(t, nil, Options{Hub: hub})
	hub.Publish(statusEpoch(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sc := ts.watch(t, ctx)
	if l := nextLine(t, sc); l.Epoch != 1 {
		t.Fatalf("first line %+v", l)
	}
	// Socket buffers hold some hundred KB; far more is published while the
	// client does not read, so the handler must fall behind.
	const n = 200_000
	for e := uint64(2); e <= n; e++ {
		hub.Publish(statusEpoch(e))
	}
	if hub.Watchers() != 0 {
		t.Fatalf("watchers = %d after the client stopped reading", hub.Watchers())
	}
	prev := uint64(1)
	for {
		l := nextLine(t, sc)
		if l.Error != "" {
			if !strings.Contains(l.Error, "fell behind") {
				t.Errorf("final error %q", l.Error)
			}
			break
		}
		if l.Epoch != prev+1 {
			t.Fatalf("epoch %d after %d: lines lost before the lag", l.Epoch, prev)
		}
		prev = l.Epoch
	}
	if prev >= n {
		t.Errorf("all %d lines delivered; the watcher never lagged", n)
	}
	ts.mustBeHealthy(t)
}

func TestWatchNoStatusYet(t *testing.T) {
	ts := startServer(t, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sc := ts.watch(t, ctx)
	// The subscription is registered before the 200 is flushed, and the
	// client has the 200.
	if ts.hub.Watchers() != 1 {
		t.Fatalf("watchers = %d, want 1", ts.hub.Watchers())
	}
	ts.hub.Publish(statusEpoch(9))
	if l := nextLine(t, sc); l.Epoch != 9 {
		t.Errorf("first line %+v", l)
	}
}

func TestNewRequiresBackendAndHub(t *testing.T) {
	if _, err := New(Options{Hub: NewHub(0)}); err == nil {
		t.Error("New without Backend succeeded")
	}
	if _, err := New(Options{Backend: &fakeBackend{}}); err == nil {
		t.Error("New without Hub succeeded")
	}
}
