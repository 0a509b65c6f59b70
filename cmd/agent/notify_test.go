package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
