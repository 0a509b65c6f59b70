package localapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// rawRequest writes raw bytes on a fresh connection and returns the status
// line of the answer ("" if the server closed without one).
func rawRequest(t *testing.T, socket, raw string) string {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Bound the test, not the server: a hung server fails instead of
	// hanging the suite.
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		// The server may close early (e.g. mid huge header); its answer
		// may still be readable.
		t.Logf("write: %v", err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

func TestHugeHeaderRefused(t *testing.T) {
	ts := startServer(t, nil, Options{})
	raw := "GET /v1/status HTTP/1.1\r\nHost: agent\r\nX-Big: " + strings.Repeat("a", 200<<10) + "\r\n\r\n"
	if got := rawRequest(t, ts.socket, raw); !strings.Contains(got, "431") {
		t.Errorf("200 KB header answered %q, want 431", got)
	}
	ts.mustBeHealthy(t)
}

func TestGarbageRefused(t *testing.T) {
	ts := startServer(t, nil, Options{})
	for _, raw := range []string{
		"\x00\x01\x02\xff\xfe garbage\r\n\r\n",
		"GET /v1/status HTTP/9.9\r\n\r\n",
		"GET /v1/status HTTP/1.1\r\nHost: agent\r\nContent-Length: -5\r\n\r\n",
	} {
		got := rawRequest(t, ts.socket, raw)
		if !strings.HasPrefix(got, "HTTP/1.1 4") && !strings.HasPrefix(got, "HTTP/1.1 5") && got != "" {
			t.Errorf("%q answered %q, want a 4xx or a closed connection", raw, got)
		}
	}
	ts.mustBeHealthy(t)
}

// A body announced and never sent must not hold a request (or the resign)
// hostage: it is read under the request timeout and refused.
func TestBodyNeverSent(t *testing.T) {
	ts := startServer(t, nil, Options{RequestTimeout: 200 * time.Millisecond})
	for _, raw := range []string{
		"POST /v1/resign HTTP/1.1\r\nHost: agent\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /v1/resign HTTP/1.1\r\nHost: agent\r\nContent-Length: 10\r\n\r\nabc",
	} {
		if got := rawRequest(t, ts.socket, raw); !strings.Contains(got, "400") {
			t.Errorf("%q answered %q, want 400", raw, got)
		}
	}
	// A small body that does arrive is fine.
	got := rawRequest(t, ts.socket, "POST /v1/resign HTTP/1.1\r\nHost: agent\r\nContent-Length: 2\r\n\r\n{}")
	if !strings.Contains(got, "200") {
		t.Errorf("POST with {} answered %q", got)
	}
	ts.be.mu.Lock()
	resigns := ts.be.resigns
	ts.be.mu.Unlock()
	if resigns != 1 {
		t.Errorf("backend Resign called %d times, want 1 (only for the complete request)", resigns)
	}
	ts.mustBeHealthy(t)
}

func TestHugeContentLengthRefusedUnread(t *testing.T) {
	ts := startServer(t, nil, Options{})
	raw := "POST /v1/resign HTTP/1.1\r\nHost: agent\r\nContent-Length: 1000000000000\r\n\r\npartial"
	if got := rawRequest(t, ts.socket, raw); !strings.Contains(got, "413") {
		t.Errorf("huge Content-Length answered %q, want 413", got)
	}
	ts.be.mu.Lock()
	resigns := ts.be.resigns
	ts.be.mu.Unlock()
	if resigns != 0 {
		t.Errorf("backend Resign called for a refused request")
	}
	ts.mustBeHealthy(t)
}

func TestIdleHalfOpenConnections(t *testing.T) {
	ts := startServer(t, nil, Options{})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 50 {
		c, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 0: // connect and say nothing
		case 1: // half a request line
			io.WriteString(c, "GET /v1/sta")
		case 2: // headers never finished
			io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: agent\r\n")
		}
	}
	// While all 50 hang, the API answers on new connections.
	ts.mustBeHealthy(t)
	var st api.Status
	if resp := ts.do(t, http.MethodGet, api.PathStatus, &st); resp.StatusCode != http.StatusOK {
		t.Errorf("status with 50 idle connections: %d", resp.StatusCode)
	}
}

func TestManyRequestsOneConnection(t *testing.T) {
	ts := startServer(t, nil, Options{})
	// Keep-alive reuse: 100 sequential requests, all answered.
	for i := range 100 {
		path := api.PathHealth
		if i%2 == 1 {
			path = fmt.Sprintf("/v1/nothing%d", i)
		}
		resp, err := ts.client.Get("http://" + api.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for _, c := range ts.srv.RequestCounts() {
		if c.Path == "other" && c.Count != 50 {
			t.Errorf("other 404 counted %d, want 50 (unknown paths share one label)", c.Count)
		}
	}
}
