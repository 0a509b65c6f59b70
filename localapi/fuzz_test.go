package localapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// FuzzServeHTTP sends arbitrary methods, paths, queries and bodies to the
// socket's handlers. None may panic; every answer has a known status code,
// and a JSON answer decodes.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []struct{ method, target, body string }{
		{"GET", "/v1/status", ""},
		{"GET", "/v1/status?consistent=1", ""},
		{"GET", "/v1/status?consistent=%zz", ""},
		{"GET", "/v1/leader?index=3&wait=10ms", ""},
		{"GET", "/v1/leader?index=-1&wait=banana", ""},
		{"GET", "/v1/leader?index=18446744073709551616", ""},
		{"GET", "/v1/watch", ""},
		{"GET", "/v1/members", ""},
		{"POST", "/v1/resign", "{}"},
		{"HEAD", "/v1/health", ""},
		{"DELETE", "/metrics", "x"},
		{"GET", "/../../etc/passwd", ""},
		{"PUT", "/v1/status", strings.Repeat("a", 5000)},
	} {
		f.Add(seed.method, seed.target, seed.body)
	}
	hub := NewHub(4)
	defer hub.Close()
	hub.Publish(statusEpoch(1))
	be := &fakeBackend{status: api.Status{Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleLeader, Leader: "n1", Epoch: 1}}
	srv, err := New(Options{Backend: be, Hub: hub, Metrics: http.NotFoundHandler(), RequestTimeout: 50 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	known := map[int]bool{200: true, 400: true, 403: true, 404: true, 405: true, 409: true, 413: true, 500: true, 503: true, 504: true}
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://"+api.Host+target, strings.NewReader(body))
		if err != nil {
			return // not a request net/http would deliver
		}
		// Streams and blocking queries end with the request's context.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		req = req.WithContext(ctx)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if !known[w.Code] {
			t.Fatalf("%s %s: status %d", method, target, w.Code)
		}
		if w.Header().Get("Content-Type") == api.ContentTypeJSON && method != http.MethodHead {
			var v any
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
				t.Fatalf("%s %s: %d answer is not JSON: %q", method, target, w.Code, w.Body.String())
			}
		}
	})
}
