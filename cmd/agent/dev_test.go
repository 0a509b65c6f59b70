package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
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
