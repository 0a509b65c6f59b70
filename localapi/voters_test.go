package localapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// voterFake is a Backend with voters.
type voterFake struct {
	*fakeBackend
	mu      sync.Mutex
	voters  api.Voters
	changes []api.VoterChange
	err     error
}

func (v *voterFake) Voters(context.Context) (api.Voters, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.voters, nil
}

func (v *voterFake) ChangeVoters(_ context.Context, c api.VoterChange) (api.Voters, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.changes = append(v.changes, c)
	if v.err != nil {
		return api.Voters{}, v.err
	}
	v.voters.Index++
	v.voters.Voters = append(v.voters.Voters, c.Add)
	return v.voters, nil
}

func startVoterServer(t *testing.T, be Backend) (*client.Client, *http.Client) {
	t.Helper()
	ts := startServer(t, nil, Options{Backend: be})
	c := client.New(ts.socket)
	t.Cleanup(c.Close)
	return c, ts.client
}

func postVoters(t *testing.T, hc *http.Client, body string) (int, string) {
	t.Helper()
	resp, err := hc.Post("http://"+api.Host+api.PathVoters, api.ContentTypeJSON, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func TestVotersEndpoint(t *testing.T) {
	be := &voterFake{fakeBackend: &fakeBackend{}, voters: api.Voters{Index: 1, Term: 1, Voters: []string{"n1", "n2", "n3"}}}
	c, hc := startVoterServer(t, be)
	ctx := context.Background()

	v, err := c.Voters(ctx)
	if err != nil || v.Index != 1 || len(v.Voters) != 3 || v.Pending != nil {
		t.Fatalf("Voters: %+v, %v", v, err)
	}
	v, err = c.AddVoter(ctx, "n4")
	if err != nil || v.Index != 2 || v.Voters[3] != "n4" {
		t.Fatalf("AddVoter: %+v, %v", v, err)
	}
	if _, err := c.RemoveVoter(ctx, "n2"); err != nil {
		t.Fatalf("RemoveVoter: %v", err)
	}
	if got := be.changes; len(got) != 2 || got[0] != (api.VoterChange{Add: "n4"}) || got[1] != (api.VoterChange{Remove: "n2"}) {
		t.Fatalf("backend saw %+v", got)
	}

	// Refusals keep their reason and map to 409, 503 and 400.
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w: a change is already in flight", ErrRefused), http.StatusConflict},
		{fmt.Errorf("%w: no leader", ErrUnavailable), http.StatusServiceUnavailable},
		{ErrNoVoters, http.StatusBadRequest},
	} {
		be.mu.Lock()
		be.err = tc.err
		be.mu.Unlock()
		_, err := c.AddVoter(ctx, "n5")
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != tc.code || !strings.Contains(ce.Message, strings.TrimPrefix(tc.err.Error(), "bad request: ")) {
			t.Errorf("%v: got %v, want %d with the reason", tc.err, err, tc.code)
		}
	}

	// Bad bodies are refused before the backend sees them.
	n := len(be.changes)
	for _, body := range []string{``, `{}`, `{"add":"a","remove":"b"}`, `{"add":1}`, `{"add":"a"} {"add":"b"}`, `{"add":"a","x":1}`, `[`, strings.Repeat(" ", 2<<10) + `{"add":"a"}`} {
		if code, msg := postVoters(t, hc, body); code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
			t.Errorf("body %.30q: %d %s", body, code, msg)
		}
	}
	if len(be.changes) != n {
		t.Errorf("a bad body reached the backend: %+v", be.changes[n:])
	}

	// Other methods: 405 naming both allowed ones.
	req, _ := http.NewRequest(http.MethodPut, "http://"+api.Host+api.PathVoters, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PUT: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// A backend without voters has no endpoint.
func TestVotersEndpointNeedsVoterBackend(t *testing.T) {
	c, _ := startVoterServer(t, &fakeBackend{})
	_, err := c.Voters(context.Background())
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound {
		t.Fatalf("got %v, want 404", err)
	}
}

// Problems travel as a JSON list and keep Status comparable.
func TestProblemsOnTheWire(t *testing.T) {
	st := api.Status{Election: api.DefaultElection, Node: "n1", Problems: api.NewProblems([]string{"n2 holds [n2]\nat index 1", "n3 differs"})}
	be := &fakeBackend{status: st}
	c, hc := startVoterServer(t, be)
	got, err := c.Status(context.Background())
	if err != nil || got != st {
		t.Fatalf("Status: %+v, %v; want %+v", got, err, st)
	}
	if l := got.Problems.List(); len(l) != 2 || l[0] != "n2 holds [n2] at index 1" {
		t.Errorf("problems %q", l)
	}
	resp, err := hc.Get("http://" + api.Host + api.PathStatus)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if !strings.Contains(b.String(), `"problems":["n2 holds [n2] at index 1","n3 differs"]`) {
		t.Errorf("wire form: %s", b.String())
	}
	be.set(func(b *fakeBackend) { b.status = api.Status{Node: "n1"} })
	resp2, err := hc.Get("http://" + api.Host + api.PathStatus)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	b.Reset()
	_, _ = b.ReadFrom(resp2.Body)
	if strings.Contains(b.String(), "problems") {
		t.Errorf("no problems, yet the key is there: %s", b.String())
	}
}
