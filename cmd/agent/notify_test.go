package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/client"
)

// notifyListener is systemd's side of the notify protocol: a Unix datagram
// socket whose path goes in $NOTIFY_SOCKET. Each datagram is passed to
// onDatagram, in order, on the reading goroutine.
func notifyListener(t *testing.T, onDatagram func(string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			onDatagram(string(buf[:n]))
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	t.Setenv("NOTIFY_SOCKET", path)
}

// TestRunNotifiesSystemd runs `agent run` under a fake systemd: READY=1
// must come only once the socket answers (checked the moment it arrives),
// WATCHDOG=1 must follow while the loop runs, and STOPPING=1 at the stop.
func TestRunNotifiesSystemd(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "n1", "agent.sock")
	path := writeConfig(t, fmt.Sprintf(`
[node]
name = "solo"
id = 1
data_dir = %q
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
protocol = "majority"
voters = ["solo"]
[api]
socket = %q
`, filepath.Join(dir, "n1"), testFreePort(t), testFreePort(t), sock))

	type event struct {
		state     string
		healthErr error // the socket's answer when READY=1 arrived
	}
	events := make(chan event, 64)
	c := client.New(sock)
	defer c.Close()
	notifyListener(t, func(state string) {
		ev := event{state: state}
		if strings.HasPrefix(state, "READY=1") {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ev.healthErr = c.Health(ctx)
			cancel()
		}
		select {
		case events <- ev:
		default: // more watchdog pings than the test reads
		}
	})
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "run", "-config", path, "-log.format=json")
	next := func(what string) event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s datagram within 30 s; stderr:\n%s", what, stderr.String())
		}
		return event{}
	}
	ev := next("READY=1")
	if !strings.HasPrefix(ev.state, "READY=1\n") || !strings.Contains(ev.state, "STATUS=serving the socket") {
		t.Fatalf("first datagram %q, want READY=1 with a STATUS", ev.state)
	}
	if ev.healthErr != nil {
		t.Fatalf("READY=1 sent while the socket did not answer: %v", ev.healthErr)
	}
	for range 2 {
		if ev := next("WATCHDOG=1"); ev.state != "WATCHDOG=1" {
			t.Fatalf("datagram after READY: %q, want WATCHDOG=1", ev.state)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("agent run: exit %d; stderr:\n%s", code, stderr.String())
	}
	for {
		ev := next("STOPPING=1")
		if ev.state == "STOPPING=1" {
			break
		}
		if ev.state != "WATCHDOG=1" {
			t.Fatalf("datagram %q while stopping, want STOPPING=1", ev.state)
		}
	}
}

// Without $NOTIFY_SOCKET nothing is sent and nothing waits (the unit may be
// Type=simple, or there is no systemd at all).
func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	stop := notifySystemd(context.Background(), filepath.Join(t.TempDir(), "none.sock"), false, nil)
	stop() // must return at once: no goroutine was started
}

// healthServer answers GET /v1/health on a Unix socket, or, once hang is
// set, holds each request until the client gives up: a stuck event loop.
type healthServer struct {
	mu       sync.Mutex
	hang     bool
	answered int // health requests answered 200
	hung     int // health requests held
}

func (h *healthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	hang := h.hang
	if hang {
		h.hung++
	} else {
		h.answered++
	}
	h.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

func (h *healthServer) counts() (answered, hung int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answered, h.hung
}

// TestWatchdogPingsOnlyAfterLoopAnswers: every WATCHDOG=1 follows a health
// answer from the loop, so when the loop stops answering the pings stop
// (a free-running timer would go on pinging a stuck agent).
func TestWatchdogPingsOnlyAfterLoopAnswers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &healthServer{}
	srv := &http.Server{Handler: hs}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	var mu sync.Mutex
	var states []string
	notifyListener(t, func(s string) {
		mu.Lock()
		states = append(states, s)
		mu.Unlock()
	})
	pings := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range states {
			if s == "WATCHDOG=1" {
				n++
			}
		}
		return n
	}
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	stop := notifySystemd(context.Background(), sock, false, zap.NewNop())
	defer stop()

	eventually(t, 20*time.Second, "two watchdog pings", func() bool { return pings() >= 2 })
	hs.mu.Lock()
	hs.hang = true
	hs.mu.Unlock()
	eventually(t, 20*time.Second, "three health requests to a stuck loop", func() bool {
		_, hung := hs.counts()
		return hung >= 3
	})
	stop()
	answered, _ := hs.counts()
	// stop has sent STOPPING=1; the listener reads it in its own time.
	eventually(t, 20*time.Second, "STOPPING=1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return states[len(states)-1] == "STOPPING=1"
	})
	n := pings()
	mu.Lock()
	first, last := states[0], states[len(states)-1]
	mu.Unlock()
	if !strings.HasPrefix(first, "READY=1") || last != "STOPPING=1" {
		t.Fatalf("datagrams from %q to %q: want READY=1 first and STOPPING=1 last", first, last)
	}
	// One answer was READY's; each ping needs one more.
	if n > answered-1 {
		t.Fatalf("%d watchdog pings for %d health answers after READY: pings went on while the loop did not answer", n, answered-1)
	}
}
