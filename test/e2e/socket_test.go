package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawExchange writes req on a fresh connection to socket and returns the
// status line of the answer, or "" when the agent closed the connection
// without one.
func rawExchange(t *testing.T, socket string, req []byte) string {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The agent may answer and close before it read everything: a failed
	// write is one of the acceptable outcomes.
	_, _ = conn.Write(req)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && line == "" {
		return ""
	}
	return strings.TrimSpace(line)
}

// TestSocketSurvivesBadClients feeds a real agent's socket garbage, an
// oversized header, a huge Content-Length and fifty idle half-open
// connections; the agent must answer each with a 4xx or a closed
// connection, and /v1/health must still answer 200 with the idle
// connections open.
func TestSocketSurvivesBadClients(t *testing.T) {
	c := newCluster(t, 1, "majority")
	c.startAll()
	nd := c.nodes[0]
	c.waitAgreement(0)

	want4xx := func(what, line string) {
		t.Helper()
		t.Logf("%s → %q", what, line)
		if line != "" && !(strings.HasPrefix(line, "HTTP/1.1 4") || strings.HasPrefix(line, "HTTP/1.0 4")) {
			t.Errorf("%s: answer %q, want a 4xx or a closed connection", what, line)
		}
	}

	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	want4xx("binary garbage", rawExchange(t, nd.socket, garbage))
	want4xx("garbage request line", rawExchange(t, nd.socket, []byte("HELLO THERE\r\n\r\n")))

	big := "GET /v1/status HTTP/1.1\r\nHost: agent\r\nX-Big: " + strings.Repeat("a", 200<<10) + "\r\n\r\n"
	if line := rawExchange(t, nd.socket, []byte(big)); line != "" && !strings.Contains(line, "431") && !strings.Contains(line, " 400 ") {
		t.Errorf("200 KB header: answer %q, want 431 (or 400, or a closed connection)", line)
	} else {
		t.Logf("200 KB header → %q", line)
	}

	huge := "POST /v1/resign HTTP/1.1\r\nHost: agent\r\nContent-Length: 9223372036854775807\r\n\r\nabc"
	line := rawExchange(t, nd.socket, []byte(huge))
	t.Logf("huge Content-Length → %q", line)
	if strings.HasPrefix(line, "HTTP/1.1 5") {
		t.Errorf("huge Content-Length: answer %q, want no server error", line)
	}
	overflow := "GET /v1/status HTTP/1.1\r\nHost: agent\r\nContent-Length: 99999999999999999999999\r\n\r\n"
	want4xx("Content-Length beyond int64", rawExchange(t, nd.socket, []byte(overflow)))

	// Fifty connections that send half a request line and go quiet.
	var idle []net.Conn
	defer func() {
		for _, conn := range idle {
			conn.Close()
		}
	}()
	for i := range 50 {
		conn, err := net.Dial("unix", nd.socket)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		idle = append(idle, conn)
		if _, err := conn.Write([]byte("GET /v1/sta")); err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nd.c.Health(ctx); err != nil {
		t.Fatalf("/v1/health with 50 idle connections open: %v", err)
	}
	// The same through plain net/http, checking the status code itself.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", nd.socket)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/v1/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("/v1/health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/health: %d, want 200", resp.StatusCode)
	}
	if !nd.p.running() {
		t.Fatalf("the agent exited: %v", nd.p.err)
	}
	if st, err := nd.status(); err != nil || st.Role != "leader" {
		t.Fatalf("status after the abuse: %+v, %v; want the single voter still leading", st, err)
	}
}
