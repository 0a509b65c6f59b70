package localapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// FuzzDecodeKeyChange: a key change body either fails with a bad request
// or names a known op and a key; it never panics.
func FuzzDecodeKeyChange(f *testing.F) {
	f.Add([]byte(`{"op":"install","key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Add([]byte(`{"op":"use","key":"x"}`))
	f.Add([]byte(`{"op":"remove"}`))
	f.Add([]byte(`{"op":"install","key":"k","extra":1}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c api.KeyChange
		if err := decodeKeyChange(b, &c); err != nil {
			return
		}
		switch c.Op {
		case api.KeyInstall, api.KeyUse, api.KeyRemove:
		default:
			t.Fatalf("accepted op %q", c.Op)
		}
		if c.Key == "" {
			t.Fatal("accepted a change without a key")
		}
	})
}

// clusterKeysFake is a Backend that runs cluster-wide key steps.
type clusterKeysFake struct {
	*fakeBackend
	mu   sync.Mutex
	seen []api.ClusterKeyChange
	err  error
}

func (f *clusterKeysFake) Keys(context.Context) (api.Keys, error) { return api.Keys{}, nil }
func (f *clusterKeysFake) ChangeKeys(context.Context, api.KeyChange) (api.Keys, error) {
	return api.Keys{}, nil
}

func (f *clusterKeysFake) ClusterKeys(_ context.Context, c api.ClusterKeyChange) (api.KeyReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, c)
	if f.err != nil {
		return api.KeyReport{}, f.err
	}
	return api.KeyReport{Op: c.Op, Members: 3, Acked: 2, Failed: []api.KeyFailure{{Member: "n3", Error: "down"}}}, nil
}

// The cluster-wide keys endpoint, through the real client: a list is a
// GET, a step a POST whose force flag reaches the backend; a malformed
// body is a 400 that never reaches it, a refused step a 409.
func TestClusterKeysEndpoint(t *testing.T) {
	f := &clusterKeysFake{fakeBackend: &fakeBackend{status: api.Status{Node: "n1", ID: 1, Protocol: "majority"}}}
	c, hc := startVoterServer(t, f)
	ctx := context.Background()
	if r, err := c.ClusterKeys(ctx); err != nil || r.Acked != 2 || r.Members != 3 || len(r.Failed) != 1 {
		t.Fatalf("list: %+v, %v", r, err)
	}
	if _, err := c.ChangeClusterKeys(ctx, api.KeyUse, "k", true); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"op":"use"}`, `{"op":"rotate","key":"k"}`, `{"op":"use","key":"k","extra":1}`, `{"op":"use","key":"k"} {}`} {
		resp, err := hc.Post("http://"+api.Host+api.PathClusterKeys, api.ContentTypeJSON, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", body, resp.StatusCode)
		}
	}
	f.mu.Lock()
	want := []api.ClusterKeyChange{{}, {Op: api.KeyUse, Key: "k", Force: true}}
	if !slices.Equal(f.seen, want) {
		t.Errorf("backend saw %+v, want %+v", f.seen, want)
	}
	f.err = fmt.Errorf("%w: n3 lacks it", ErrKeysRefused)
	f.mu.Unlock()
	_, err := c.ChangeClusterKeys(ctx, api.KeyUse, "k", false)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict || !strings.Contains(ce.Message, "n3 lacks it") {
		t.Errorf("a refused step: %v, want a 409 naming n3", err)
	}
}
