package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// sessionFake is a fakeBackend that keeps sessions as the agent does: by
// id, each with the channel its end arrives on.
type sessionFake struct {
	*fakeBackend
	mu     sync.Mutex
	next   int
	open   map[string]chan string
	closed []string
	refuse error // OpenSession's error, when set
	ttl    time.Duration
}

func newSessionFake() *sessionFake {
	return &sessionFake{fakeBackend: &fakeBackend{status: statusEpoch(1)}, open: map[string]chan string{}, ttl: 3 * time.Second}
}

func (b *sessionFake) OpenSession(ctx context.Context) (Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse != nil {
		return Session{}, b.refuse
	}
	b.next++
	id := fmt.Sprintf("s-%d", b.next)
	ch := make(chan string, 1)
	b.open[id] = ch
	return Session{ID: id, TTL: b.ttl, Wait: func(ctx context.Context) string {
		select {
		case why := <-ch:
			return why
		case <-ctx.Done():
			return ""
		}
	}}, nil
}

func (b *sessionFake) KeepSession(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.open[id]; !ok {
		return ErrSessionEnded
	}
	return nil
}

func (b *sessionFake) CloseSession(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, id)
	b.closed = append(b.closed, id)
	return nil
}

// end ends session id as the core does when its holder misses a check-in.
func (b *sessionFake) end(id, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.open[id]; ok {
		ch <- why
		delete(b.open, id)
	}
}

func (b *sessionFake) wasClosed(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.closed, id)
}

func startSessionServer(t *testing.T, opts Options) (*testServer, *sessionFake) {
	t.Helper()
	sf := newSessionFake()
	opts.Backend = sf
	ts := startServer(t, sf.fakeBackend, opts)
	ts.hub.Publish(statusEpoch(1))
	return ts, sf
}

// campaign opens a campaign stream.
func (ts *testServer) campaign(t *testing.T, ctx context.Context) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api.Host+api.PathCampaign, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewScanner(resp.Body)
}

func campaignLine(t *testing.T, sc *bufio.Scanner) api.CampaignLine {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("campaign stream ended: %v", sc.Err())
	}
	var l api.CampaignLine
	if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
		t.Fatalf("campaign line %q: %v", sc.Bytes(), err)
	}
	return l
}

// A campaign names its session, streams the election's status while it
// lives, and ends with why; a heartbeat keeps it until then and is
// refused with 410 after.
func TestCampaignStream(t *testing.T) {
	ts, sf := startSessionServer(t, Options{})
	resp, sc := ts.campaign(t, context.Background())
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		t.Fatalf("campaign: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !sc.Scan() {
		t.Fatalf("campaign stream ended: %v", sc.Err())
	}
	if want := `{"election":"default","session":"s-1","ttl_ms":3000}`; sc.Text() != want {
		t.Errorf("first line %s, want %s", sc.Text(), want)
	}
	var first api.CampaignLine
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil {
		t.Fatal(err)
	}
	if first.Session != "s-1" || first.TTLMS != 3000 || first.Election != api.DefaultElection {
		t.Fatalf("first line %+v, want session s-1, ttl_ms 3000, election default", first)
	}
	if l := campaignLine(t, sc); l.Epoch != 1 || l.Session != "" || l.Ended != "" {
		t.Errorf("second line %+v, want the current status", l)
	}
	var hb api.Heartbeat
	if r := ts.do(t, http.MethodPost, api.PathHeartbeat+"?session=s-1", &hb); r.StatusCode != http.StatusOK || hb.Session != "s-1" {
		t.Errorf("heartbeat: %d %+v", r.StatusCode, hb)
	}
	ts.hub.Publish(statusEpoch(2))
	if l := campaignLine(t, sc); l.Epoch != 2 {
		t.Errorf("after a change: %+v, want epoch 2", l)
	}
	sf.end("s-1", api.SessionExpired)
	last := campaignLine(t, sc)
	if last.Ended != api.SessionExpired || !strings.Contains(last.Error, "campaign again") || !strings.Contains(last.Error, "3s") {
		t.Errorf("last line %+v, want ended expired saying the ttl and to campaign again", last)
	}
	if sc.Scan() {
		t.Errorf("a line after the last: %s", sc.Bytes())
	}
	msg := ts.expectError(t, http.MethodPost, api.PathHeartbeat+"?session=s-1", http.StatusGone)
	if !strings.Contains(msg, "campaign again") {
		t.Errorf("heartbeat after the end: %q, want it to say to campaign again", msg)
	}
}

// The client hanging up closes its session.
func TestCampaignHangUpCloses(t *testing.T) {
	ts, sf := startSessionServer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	_, sc := ts.campaign(t, ctx)
	id := campaignLine(t, sc).Session
	cancel()
	for deadline := time.Now().Add(10 * time.Second); !sf.wasClosed(id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session %s still open after its client hung up", id)
		}
	}
	ts.expectError(t, http.MethodPost, api.PathHeartbeat+"?session="+id, http.StatusGone)
}

// The agent stopping ends a campaign with a last line that says so.
func TestCampaignEndsOnShutdown(t *testing.T) {
	ts, _ := startSessionServer(t, Options{})
	_, sc := ts.campaign(t, context.Background())
	campaignLine(t, sc)
	campaignLine(t, sc)
	go func() { _ = ts.srv.Shutdown(context.Background()) }()
	if l := campaignLine(t, sc); l.Ended != api.SessionStopped {
		t.Errorf("last line %+v, want ended stopped", l)
	}
}

// Refusals say what to do, with the status codes of docs/design.md §6.
func TestCampaignRefusals(t *testing.T) {
	ts, sf := startSessionServer(t, Options{MaxWatchers: 1})
	cases := []struct {
		refuse error
		code   int
		says   string
	}{
		{ErrNoSessions, http.StatusConflict, `set candidacy = "session"`},
		{fmt.Errorf("%w: not a voter (voters: n1,n2,n3)", ErrNotCandidate), http.StatusConflict, "voters: n1,n2,n3"},
		{ErrTooManySessions, http.StatusServiceUnavailable, "retry later"},
	}
	for _, c := range cases {
		sf.mu.Lock()
		sf.refuse = c.refuse
		sf.mu.Unlock()
		if msg := ts.expectError(t, http.MethodPost, api.PathCampaign, c.code); !strings.Contains(msg, c.says) {
			t.Errorf("refused with %v: %q, want it to say %q", c.refuse, msg, c.says)
		}
	}
	sf.mu.Lock()
	sf.refuse = nil
	sf.mu.Unlock()
	ts.expectError(t, http.MethodGet, api.PathCampaign, http.StatusMethodNotAllowed)
	ts.expectError(t, http.MethodPost, api.PathHeartbeat, http.StatusBadRequest)
	ts.expectError(t, http.MethodPost, api.PathHeartbeat+"?session="+strings.Repeat("x", 65), http.StatusBadRequest)
	ts.expectError(t, http.MethodPost, api.PathHeartbeat+"?session=nope", http.StatusGone)

	// A campaign holds a stream slot, as a watch does.
	_, sc := ts.campaign(t, context.Background())
	campaignLine(t, sc)
	if msg := ts.expectError(t, http.MethodGet, api.PathWatch, http.StatusServiceUnavailable); !strings.Contains(msg, "api.max_watchers") {
		t.Errorf("watch beyond the stream bound: %q", msg)
	}
	if msg := ts.expectError(t, http.MethodPost, api.PathCampaign, http.StatusServiceUnavailable); !strings.Contains(msg, "api.max_watchers") {
		t.Errorf("campaign beyond the stream bound: %q", msg)
	}
}
