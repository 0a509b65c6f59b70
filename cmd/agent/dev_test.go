package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/config"
)

// agent dev: a local cluster driven by commands on standard input.
func TestDev(t *testing.T) {
	dir := t.TempDir()
	in, typed := io.Pipe()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- devMain(context.Background(), 1, "majority", dir, false, in, &stdout, &stderr) }()
	t.Cleanup(func() {
		typed.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("agent dev did not stop")
		}
	})
	typeLine := func(line string) {
		t.Helper()
		if _, err := io.WriteString(typed, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, 20*time.Second, "n1 to lead", func() bool { return strings.Contains(stdout.String(), "n1: leader") })
	out := stdout.String()
	for _, want := range []string{"conclave dev cluster: 1 agents (majority) in " + dir, "agent status -socket " + dir + "/n1/agent.sock"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent dev: no %q in\n%s", want, out)
		}
	}
	sock := dir + "/n1/agent.sock"
	if code, stdout, _ := cli(t, "status", "-socket", sock); code != 0 || !strings.Contains(stdout, "role      leader\n") {
		t.Errorf("agent status on the dev cluster's n1: exit %d\n%s", code, stdout)
	}

	typeLine("frobnicate")
	eventually(t, 10*time.Second, "an error for an unknown command", func() bool {
		return strings.Contains(stdout.String(), `unknown command "frobnicate"`)
	})
	typeLine("kill n1")
	eventually(t, 10*time.Second, "n1 to be killed", func() bool {
		code, _, _ := cli(t, "status", "-socket", sock)
		return code != 0
	})
	typeLine("kill n1")
	eventually(t, 10*time.Second, "an error for killing a stopped node", func() bool {
		return strings.Contains(stdout.String(), "n1 is not running")
	})
	typeLine("start n1")
	eventually(t, 20*time.Second, "n1 to lead again", func() bool {
		return strings.Count(stdout.String(), "n1: leader") >= 2
	})
	typeLine("quit")
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Errorf("agent dev quit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent dev did not quit")
	}
	if code, _, _ := cli(t, "status", "-socket", sock); code == 0 {
		t.Error("n1 still answers after quit")
	}
}

// devSession runs devMain in the background; type sends a line to it.
type devSession struct {
	t      *testing.T
	stdout *syncBuffer
	typed  *io.PipeWriter
	done   chan error
	// quitNow cancels devMain's context, like Ctrl-C.
	quitNow context.CancelFunc
}

func startDev(t *testing.T, n int, protocol string) *devSession {
	t.Helper()
	in, typed := io.Pipe()
	ds := &devSession{t: t, stdout: &syncBuffer{}, typed: typed, done: make(chan error, 1)}
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ds.quitNow = cancel
	go func() { ds.done <- devMain(ctx, n, protocol, t.TempDir(), false, in, ds.stdout, &stderr) }()
	t.Cleanup(func() {
		typed.Close() // end of input: the reader stops; devMain runs on
		select {
		case <-ds.done:
			return
		default:
		}
		ds.quitNow() // as Ctrl-C would
		select {
		case <-ds.done:
		case <-time.After(20 * time.Second):
			t.Error("agent dev did not stop")
		}
	})
	return ds
}

func (ds *devSession) typeLine(line string) {
	_, _ = io.WriteString(ds.typed, line+"\n")
}

// waitFor waits until the output matches re and returns the match.
func (ds *devSession) waitFor(what, re string) []string {
	ds.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	eventually(ds.t, 30*time.Second, what, func() bool {
		m = rx.FindStringSubmatch(ds.stdout.String())
		return m != nil
	})
	return m
}

// TestDevSaysWhatHappened: every command answers; a kill of the leader is
// followed by the failover, timed; names are checked; quit starts no
// elections.
func TestDevSaysWhatHappened(t *testing.T) {
	ds := startDev(t, 3, config.ProtocolMajority)
	ds.waitFor("a leader", `(n\d): leader `)

	ds.typeLine("kill")
	ds.waitFor("a usage line for a bare kill", `error: usage: kill NAME \(one of n1, n2, n3, or leader\)`)
	ds.typeLine("resign")
	ds.waitFor("a usage line for a bare resign", `error: usage: resign NAME`)
	ds.typeLine("kill n9")
	ds.waitFor("n9 named as unknown", `error: unknown node "n9": the nodes are n1, n2, n3`)

	ds.typeLine("kill leader   # crash: a comment, as in the README")
	killed := ds.waitFor("the kill acknowledged", `killed (n\d), the leader of epoch (\d+)`)
	ds.waitFor("the failover, timed", `failover: n\d leads epoch \d+, [0-9.]+m?s after `+killed[1]+` was killed \(first reported by n\d\)`)
	ds.typeLine("kill " + killed[1])
	ds.waitFor("a second kill refused", killed[1]+` is not running \(start `+killed[1]+`\)`)
	ds.typeLine("start all")
	ds.waitFor("the restart acknowledged", `started `+killed[1]+` from `)

	ds.typeLine("resign leader")
	ds.waitFor("the resign acknowledged", `resign n\d, the leader of epoch \d+: it hands leadership over`)
	h := ds.waitFor("the handover, timed", `handover: (n\d) leads epoch (\d+), [0-9.]+m?s after n\d was asked to resign`)
	// The handover line comes with the first report of the new leader;
	// the other two report it later (much later on a loaded machine), and
	// those lines must not be taken for elections started by quit.
	eventually(t, 30*time.Second, "every node to report the new leader", func() bool {
		rx := regexp.MustCompile(`(n\d): (leader|follower) +leader="` + h[1] + `" epoch=` + h[2] + `\b`)
		seen := map[string]bool{}
		for _, m := range rx.FindAllStringSubmatch(ds.stdout.String(), -1) {
			seen[m[1]] = true
		}
		return len(seen) == 3
	})

	before := len(ds.stdout.String())
	ds.typeLine("quit")
	select {
	case err := <-ds.done:
		ds.done <- err
		if err != nil {
			t.Fatalf("quit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent dev did not quit")
	}
	if after := ds.stdout.String()[before:]; !regexp.MustCompile(`^\S+  stopped n1, n2, n3\n$`).MatchString(after) {
		t.Errorf("after quit agent dev printed %q; want only the stopped line (no handover elections)", after)
	}
}

// TestDevBannerFirst: the banner comes before any agent's report, whatever
// the protocol (bully's first event used to come first).
func TestDevBannerFirst(t *testing.T) {
	ds := startDev(t, 1, config.ProtocolBully)
	ds.waitFor("n1 to lead", `n1: leader `)
	if out := ds.stdout.String(); !strings.HasPrefix(out, "conclave dev cluster: 1 agents (bully)") {
		t.Errorf("agent dev -protocol bully began with %q", out[:min(len(out), 80)])
	}
}
