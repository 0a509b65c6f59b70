package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childScript is what `agent exec` runs beside each agent: it records
// "pid epoch leader" in $MARK_DIR/$NODE.$CONCLAVE_EPOCH, then becomes a
// long sleep with the same pid.
const childScript = `echo "$$ $CONCLAVE_EPOCH $CONCLAVE_LEADER" > "$MARK_DIR/$NODE.$CONCLAVE_EPOCH.tmp" && mv "$MARK_DIR/$NODE.$CONCLAVE_EPOCH.tmp" "$MARK_DIR/$NODE.$CONCLAVE_EPOCH"; exec sleep 600`

// marker is one child start recorded by childScript.
type marker struct {
	node   string
	epoch  uint64
	pid    int
	leader string
}

// readMarkers returns every child start recorded so far.
func readMarkers(t testing.TB, dir string) []marker {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []marker
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		node, _, _ := strings.Cut(e.Name(), ".")
		var m marker
		if _, err := fmt.Sscanf(string(b), "%d %d %s", &m.pid, &m.epoch, &m.leader); err != nil {
			t.Fatalf("marker %s: %q: %v", e.Name(), b, err)
		}
		m.node = node
		out = append(out, m)
	}
	return out
}

// alive reports whether pid runs (a zombie counts as dead: it waits only
// to be reaped).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE …; comm may hold spaces, so look after the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// TestExecRunsOnlyBesideTheLeader runs `agent exec` beside each of three
// agents: the child must run on the leader only, with the leader's epoch;
// after a SIGKILL of the leader's agent its child must be stopped within a
// bounded time, and a child must start beside the new leader.
func TestExecRunsOnlyBesideTheLeader(t *testing.T) {
	c := newCluster(t, 3, "majority")
	marks := filepath.Join(c.dir, "marks")
	if err := os.Mkdir(marks, 0o700); err != nil {
		t.Fatal(err)
	}
	c.startAll()
	first := c.waitAgreement(0)
	for _, nd := range c.nodes {
		c.spawn("exec-"+nd.name, []string{"NODE=" + nd.name, "MARK_DIR=" + marks},
			"exec", "-socket", nd.socket, "-grace", "2s", "--", "sh", "-c", childScript)
	}

	var started marker
	waitFor(t, electWait, "a child beside the leader", func() (bool, string) {
		ms := readMarkers(t, marks)
		if len(ms) == 0 {
			return false, "no child started"
		}
		started = ms[0]
		return true, ""
	})
	// Give a wrongly started second child the time to show (bounded
	// polling, no assertion on timing).
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if ms := readMarkers(t, marks); len(ms) != 1 {
			t.Fatalf("children started: %+v, want exactly one beside the leader", ms)
		}
	}
	if started.node != first.leader || started.epoch != first.epoch || started.leader != first.leader {
		t.Fatalf("child %+v, want one beside leader %s with epoch %d", started, first.leader, first.epoch)
	}
	if !alive(started.pid) {
		t.Fatalf("child pid %d beside the leader is not running", started.pid)
	}

	old := c.byName(first.leader)
	old.p.signal(t, syscall.SIGKILL)
	killed := time.Now()
	const childStopWait = 10 * time.Second
	waitFor(t, childStopWait, "the old leader's child stopped after SIGKILL of its agent", func() (bool, string) {
		return !alive(started.pid), fmt.Sprintf("pid %d alive", started.pid)
	})
	t.Logf("MEASURED: child of %s stopped %v after SIGKILL of its agent", old.name, time.Since(killed).Round(time.Millisecond))

	second := c.waitAgreement(first.epoch)
	var next marker
	waitFor(t, electWait, "a child beside the new leader", func() (bool, string) {
		for _, m := range readMarkers(t, marks) {
			if m.epoch > first.epoch {
				next = m
				return true, ""
			}
		}
		return false, "no child with a newer epoch"
	})
	if next.node != second.leader || next.epoch != second.epoch {
		t.Fatalf("new child %+v, want one beside %s with epoch %d", next, second.leader, second.epoch)
	}
	if !alive(next.pid) {
		t.Fatalf("new child pid %d is not running", next.pid)
	}
	if ms := readMarkers(t, marks); len(ms) != 2 {
		t.Fatalf("children started: %+v, want two (one per leadership)", ms)
	}
	t.Logf("child beside %s (epoch %d) pid %d, then beside %s (epoch %d) pid %d",
		started.node, started.epoch, started.pid, next.node, next.epoch, next.pid)
}
