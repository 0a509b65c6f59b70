package localapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Beyond api.max_connections a connection gets a 503 at once and is
// closed; the agent keeps answering the others, and a slot that frees up is
// used again. Before the bound, every connection was kept.
func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, nil, Options{MaxConnections: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The server counts a connection when it accepts it.
	eventuallyT(t, func() bool { return ts.srv.Limits().Connections == 2 })
	c, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the connection over the limit got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "api.max_connections") {
		t.Fatalf("over the limit: %d %s, want 503 naming api.max_connections", resp.StatusCode, body)
	}
	if got := ts.srv.Limits().RefusedConnections; got != 1 {
		t.Errorf("RefusedConnections = %d, want 1", got)
	}
	for _, c := range held {
		c.Close()
	}
	eventuallyT(t, func() bool { return ts.srv.Limits().Connections == 0 })
	ts.mustBeHealthy(t)
}

// Beyond api.max_watchers a watch request gets a 503; other requests and
// the open streams go on.
func TestWatcherLimit(t *testing.T) {
	ts := startServer(t, nil, Options{MaxWatchers: 1})
	ts.hub.Publish(statusEpoch(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, sc := ts.watch(t, ctx)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first watcher: %d", resp.StatusCode)
	}
	nextLine(t, sc)
	msg := ts.expectError(t, http.MethodGet, "/v1/watch", http.StatusServiceUnavailable)
	if !strings.Contains(msg, "api.max_watchers") {
		t.Errorf("refusal %q does not name api.max_watchers", msg)
	}
	ts.mustBeHealthy(t)
	if l := ts.srv.Limits(); l.Watchers != 1 || l.RefusedWatchers != 1 {
		t.Errorf("limits %+v, want 1 watcher and 1 refused", l)
	}
	cancel()
	eventuallyT(t, func() bool { return ts.srv.Limits().Watchers == 0 })
}

func eventuallyT(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}
