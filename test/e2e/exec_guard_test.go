package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guardScript is a command that ignores SIGTERM and starts two
// grandchildren that ignore it too: one in its process group, and one that
// leaves it for a session of its own (setsid), which no signal to the
// command's group reaches. Each records its pid in $PIDS/<name>.
const guardScript = `trap '' TERM
sh -c 'trap "" TERM; echo $$ > "$PIDS/grandchild.tmp"; mv "$PIDS/grandchild.tmp" "$PIDS/grandchild"; while :; do sleep 1; done' &
setsid sh -c 'trap "" TERM; echo $$ > "$PIDS/escaped.tmp"; mv "$PIDS/escaped.tmp" "$PIDS/escaped"; while :; do sleep 1; done' &
echo $$ > "$PIDS/command.tmp"; mv "$PIDS/command.tmp" "$PIDS/command"
while :; do sleep 1; done`

// TestExecCommandDiesWithExec SIGKILLs `agent exec` itself (as the OOM
// killer or a supervisor that kills only the main pid would) while it runs
// a command beside the leader. The command and its grandchildren used to be
// re-parented to init and run on; they must all be gone. The number of
// runs is CONCLAVE_EXEC_KILL_RUNS (default 2; the issue asks for 10 of 10,
// see docs/hostile.md). Each run's time from the SIGKILL to the last
// process gone is logged, not asserted: the bound below only stops a hang.
func TestExecCommandDiesWithExec(t *testing.T) {
	runs := 2
	if v := os.Getenv("CONCLAVE_EXEC_KILL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CONCLAVE_EXEC_KILL_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	c := newCluster(t, 1, "majority")
	c.startAll()
	c.waitAgreement(0)
	nd := c.nodes[0]
	var worst time.Duration
	for run := range runs {
		pids := filepath.Join(c.dir, fmt.Sprintf("pids%d", run))
		if err := os.Mkdir(pids, 0o700); err != nil {
			t.Fatal(err)
		}
		ex := c.spawn(fmt.Sprintf("exec%d", run), []string{"PIDS=" + pids},
			"exec", "-socket", nd.socket, "-grace", "30s", "--", "sh", "-c", guardScript)
		procs := map[string]int{}
		t.Cleanup(func() {
			// A failed run must not leave its processes behind.
			for _, pid := range procs {
				if alive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		waitFor(t, electWait, "the command and its grandchildren to start", func() (bool, string) {
			for _, name := range []string{"command", "grandchild", "escaped"} {
				b, err := os.ReadFile(filepath.Join(pids, name))
				if err != nil {
					return false, name + " not started"
				}
				procs[name], _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			return true, ""
		})
		ex.signal(t, syscall.SIGKILL)
		killed := time.Now()
		// Poll every few milliseconds so the figure means something; the
		// bound only stops a hang.
		var left []string
		for deadline := killed.Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			left = left[:0]
			for name, pid := range procs {
				if alive(pid) {
					left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			t.Fatalf("run %d: 10s after SIGKILL of agent exec, still running: %s", run+1, strings.Join(left, ", "))
		}
		took := time.Since(killed)
		worst = max(worst, took)
		ex.wait(t, exitWait)
		t.Logf("MEASURED: run %d: command, grandchild and escaped grandchild gone %v after SIGKILL of agent exec", run+1, took.Round(time.Millisecond))
	}
	t.Logf("MEASURED: worst of %d runs: %v", runs, worst.Round(time.Millisecond))
}
