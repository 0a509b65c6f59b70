package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

// lines returns the complete lines in s.
func lines(s string) []string {
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(s[:i], "\n")
}

// TestWatch: -json prints the current state first, then one line per
// change; cancelling (SIGINT for the CLI) ends it with exit 0.
func TestWatch(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	li, first := tc.waitLeader(0)
	fi := tc.follower(li)

	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "watch", "-json", "-socket", tc.socket(fi))
	eventually(t, 10*time.Second, "first watch line", func() bool { return len(lines(stdout.String())) > 0 })
	var st api.Status
	line := lines(stdout.String())[0]
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		t.Fatalf("watch line %q: %v", line, err)
	}
	if !strings.Contains(line, `"lease_ms":`) || !strings.Contains(line, `"quorum":{`) {
		t.Errorf("watch line %q lacks the status field names", line)
	}
	if st.Node != tc.cfgs[fi].Node.Name || st.Role != api.RoleFollower || st.Leader != first.Node || st.Epoch != first.Epoch {
		t.Errorf("first watch line %+v, want %s following %s in epoch %d", st, tc.cfgs[fi].Node.Name, first.Node, first.Epoch)
	}

	if code, _, errOut := cli(t, "resign", "-socket", tc.socket(li)); code != 0 {
		t.Fatalf("agent resign: exit %d, %s", code, errOut)
	}
	_, second := tc.waitLeader(first.Epoch)
	// Every change reaches the watcher: eventually a line with the new
	// leadership.
	eventually(t, 10*time.Second, "a watch line with the new leader", func() bool {
		for _, l := range lines(stdout.String()) {
			var s api.Status
			if json.Unmarshal([]byte(l), &s) == nil && s.Leader == second.Node && s.Epoch == second.Epoch {
				return true
			}
		}
		return false
	})
	var epoch uint64
	for _, l := range lines(stdout.String()) {
		var s api.Status
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("watch line %q: %v", l, err)
		}
		if s.Epoch < epoch {
			t.Errorf("watch epochs went back: %d after %d", s.Epoch, epoch)
		}
		epoch = s.Epoch
	}
	if code := stop(); code != 0 || stderr.String() != "" {
		t.Errorf("watch stopped: exit %d, stderr %q", code, stderr.String())
	}
}

func TestWatchTable(t *testing.T) {
	_, sock := startSingle(t)
	st := statusAt(t, sock)
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "watch", "-socket", sock)
	eventually(t, 10*time.Second, "first watch line", func() bool { return len(lines(stdout.String())) > 0 })
	if line, want := lines(stdout.String())[0], fmt.Sprintf("  leader    leader=n1 epoch=%d", st.Epoch); !strings.HasSuffix(line, want) {
		t.Errorf("watch line %q, want a time then %q", line, want)
	}
	if code := stop(); code != 0 {
		t.Errorf("watch stopped: exit %d, stderr %q", code, stderr.String())
	}
}

// When the agent goes away, watch ends by itself with an error.
func TestWatchAgentStops(t *testing.T) {
	tc, sock := startSingle(t)
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- dispatch([]string{"watch", "-socket", sock}, &stdout, &stderr) }()
	eventually(t, 10*time.Second, "first watch line", func() bool { return len(lines(stdout.String())) > 0 })
	tc.stop(0, false)
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(stderr.String(), "agent watch: ") {
			t.Errorf("watch after the agent stopped: exit %d, stderr %q; want exit 1 and the reason", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch still running 20s after its agent stopped")
	}
}
