package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

// execScript is a child for `agent exec`: it records its environment and
// pid in dir/env, the signals it gets in dir/usr1 and dir/term (exiting 7
// on SIGTERM, or ignoring it with ignoreTerm), and sleeps.
func execScript(dir string, ignoreTerm bool) string {
	term := fmt.Sprintf(`trap 'echo term > "%s/term"; exit 7' TERM`, dir)
	if ignoreTerm {
		term = `trap '' TERM`
	}
	return term + fmt.Sprintf(`
trap 'echo usr1 >> "%[1]s/usr1"' USR1
echo "$CONCLAVE_EPOCH $CONCLAVE_LEADER $$ $CONCLAVE_ELECTION" > "%[1]s/env.tmp" && mv "%[1]s/env.tmp" "%[1]s/env"
while :; do sleep 1; done
`, dir)
}

type childInfo struct {
	epoch    uint64
	leader   string
	pid      int
	election string
}

// waitChild waits for the child to write dir/env and returns what it wrote.
func waitChild(t *testing.T, dir string, stderr *syncBuffer) childInfo {
	t.Helper()
	var ci childInfo
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "env"))
		if err == nil {
			f := strings.Fields(string(b))
			if len(f) != 4 {
				t.Fatalf("child environment %q, want epoch, leader, pid and election", b)
			}
			ci.election = f[3]
			ci.epoch, _ = strconv.ParseUint(f[0], 10, 64)
			ci.leader = f[1]
			ci.pid, _ = strconv.Atoi(f[2])
			return ci
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within 15s; exec's stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupGone reports whether no live process is left in process group pgid.
// Zombies do not count: a grandchild killed with its group is reaped by
// init, not by exec, and kill(-pgid, 0) still finds it until then.
func groupGone(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return false
		}
	}
	return true
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// exec starts the command with the epoch and leader in its environment,
// forwards SIGUSR1, and on its own SIGTERM (here: cancellation) passes
// SIGTERM on and exits with the command's code.
func TestExecRunsWhileLeading(t *testing.T) {
	_, sock := startSingle(t)
	st := statusAt(t, sock)
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", sock, "-grace", "20s", "--", "sh", "-c", execScript(dir, false))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exec's stderr:\n%s", stderr.String())
		}
	})
	ci := waitChild(t, dir, &stderr)
	if ci.epoch != st.Epoch || ci.leader != "n1" || ci.election != api.DefaultElection {
		t.Errorf("child saw CONCLAVE_EPOCH=%d CONCLAVE_LEADER=%q CONCLAVE_ELECTION=%q, want %d, n1 and default", ci.epoch, ci.leader, ci.election, st.Epoch)
	}
	if want := fmt.Sprintf("leading in epoch %d: started sh (pid %d)", st.Epoch, ci.pid); !strings.Contains(stderr.String(), want) {
		t.Errorf("exec's stderr does not say %q:\n%s", want, stderr.String())
	}

	// exec has registered for SIGUSR1 before it started the child, so the
	// signal goes to exec (not the default action) and on to the child.
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "SIGUSR1 forwarded to the command", func() bool { return exists(filepath.Join(dir, "usr1")) })

	if code := stop(); code != 7 {
		t.Errorf("exec stopped: exit %d, want the command's 7; stderr:\n%s", code, stderr.String())
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
	if !groupGone(ci.pid) {
		t.Errorf("processes of the command's group %d still run after exec returned", ci.pid)
	}
}

// A crashed agent can vouch for nothing: exec stops the command at once and
// keeps waiting for leadership.
func TestExecStopsCommandWhenAgentDies(t *testing.T) {
	tc, sock := startSingle(t)
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", sock, "-grace", "20s", "--", "sh", "-c", execScript(dir, false))
	ci := waitChild(t, dir, &stderr)

	tc.stop(0, true)
	// "command exited" is exec's own word that it reaped the command: the
	// files alone can show up before that, and stopping exec in between
	// makes it report the command's code instead of 0.
	eventually(t, 10*time.Second, "the command to be stopped after the agent died", func() bool {
		return exists(filepath.Join(dir, "term")) && groupGone(ci.pid) && strings.Contains(stderr.String(), "command exited")
	})
	if want := fmt.Sprintf("leadership of epoch %d lost", ci.epoch); !strings.Contains(stderr.String(), want) {
		t.Errorf("exec's stderr does not say %q:\n%s", want, stderr.String())
	}
	if code := stop(); code != 0 {
		t.Errorf("exec stopped with no command running: exit %d, want 0", code)
	}
}

// Resigning ends the leadership, so exec stops the command.
func TestExecStopsCommandOnResign(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	li, first := tc.waitLeader(0)
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", tc.socket(li), "-grace", "20s", "--", "sh", "-c", execScript(dir, false))
	ci := waitChild(t, dir, &stderr)
	if ci.epoch != first.Epoch || ci.leader != first.Node {
		t.Errorf("child saw epoch %d leader %q, want %d and %s", ci.epoch, ci.leader, first.Epoch, first.Node)
	}
	if code, _, errOut := cli(t, "resign", "-socket", tc.socket(li)); code != 0 {
		t.Fatalf("agent resign: exit %d, %s", code, errOut)
	}
	eventually(t, 10*time.Second, "the command to be stopped after the resign", func() bool {
		return exists(filepath.Join(dir, "term")) && groupGone(ci.pid)
	})
	if want := fmt.Sprintf("leadership of epoch %d lost", first.Epoch); !strings.Contains(stderr.String(), want) {
		t.Errorf("exec's stderr does not say %q:\n%s", want, stderr.String())
	}
	stop()
}

// A command that ignores SIGTERM is killed after -grace, and exec reports
// the signal the shell way (128+9).
func TestExecKillsAfterGrace(t *testing.T) {
	_, sock := startSingle(t)
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", sock, "-grace", "200ms", "--", "sh", "-c", execScript(dir, true))
	ci := waitChild(t, dir, &stderr)
	if code := stop(); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exec stopped a command that ignores SIGTERM: exit %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGKILL), stderr.String())
	}
	eventually(t, 10*time.Second, "every process of the command's group to end", func() bool { return groupGone(ci.pid) })
}

// A command that exits by itself while the node still leads is started
// again, in the same epoch.
func TestExecRestartsCommandThatExits(t *testing.T) {
	_, sock := startSingle(t)
	st := statusAt(t, sock)
	runs := filepath.Join(t.TempDir(), "runs")
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", sock, "--", "sh", "-c", `echo "$CONCLAVE_EPOCH" >> "`+runs+`"; exit 3`)
	eventually(t, 15*time.Second, "the command to run twice", func() bool {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "\n") >= 2
	})
	b, _ := os.ReadFile(runs)
	for _, e := range strings.Fields(string(b)) {
		if e != strconv.FormatUint(st.Epoch, 10) {
			t.Errorf("a run saw CONCLAVE_EPOCH=%s, want %d", e, st.Epoch)
		}
	}
	if !strings.Contains(stderr.String(), "command exited: exit status 3") {
		t.Errorf("exec's stderr does not report the exit:\n%s", stderr.String())
	}
	stop()
}

// With no agent to vouch for leadership, the command never starts and exec
// says why, naming the socket.
func TestExecWithoutAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "nobody.sock")
	marker := filepath.Join(dir, "started")
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", sock, "--", "touch", marker)
	eventually(t, 10*time.Second, "exec to report the missing agent", func() bool {
		return strings.Contains(stderr.String(), "cannot reach the agent (no agent socket at "+sock)
	})
	if code := stop(); code != 0 {
		t.Errorf("exec stopped: exit %d", code)
	}
	if exists(marker) {
		t.Error("the command ran with no agent")
	}
}

// On a follower exec says what it waits for, naming the leader; when the
// leader resigns to it, it says the command started, with the epoch; with
// -quiet it says nothing at all.
func TestExecSaysWhatItWaitsFor(t *testing.T) {
	tc := newTestCluster(t, 2, config.ProtocolMajority)
	li, first := tc.waitLeader(0)
	fi := tc.follower(li)
	dir, quietDir := t.TempDir(), t.TempDir()
	var stdout, stderr, quietOut, quietErr syncBuffer
	stop := background(t, &stdout, &stderr, "exec", "-socket", tc.socket(fi), "--", "sh", "-c", execScript(dir, false))
	stopQuiet := background(t, &quietOut, &quietErr, "exec", "-quiet", "-socket", tc.socket(fi), "--", "sh", "-c", execScript(quietDir, false))
	want := fmt.Sprintf("agent exec: waiting for leadership: %s leads epoch %d, this node %s is follower", first.Node, first.Epoch, tc.cfgs[fi].Node.Name)
	eventually(t, 10*time.Second, "exec to say it waits for "+first.Node, func() bool { return strings.Contains(stderr.String(), want) })
	if n := strings.Count(stderr.String(), "waiting for leadership"); n != 1 {
		t.Errorf("exec repeated its unchanged report %d times (it polls ten times a second):\n%s", n, stderr.String())
	}
	if code, _, errOut := cli(t, "resign", "-socket", tc.socket(li)); code != 0 {
		t.Fatalf("agent resign: exit %d, %s", code, errOut)
	}
	ci := waitChild(t, dir, &stderr)
	waitChild(t, quietDir, &quietErr)
	eventually(t, 10*time.Second, "exec to report the start", func() bool {
		return strings.Contains(stderr.String(), fmt.Sprintf("leading in epoch %d: started sh (pid %d)", ci.epoch, ci.pid))
	})
	stop()
	stopQuiet()
	if !strings.Contains(stderr.String(), fmt.Sprintf("command exited: exit status 7 (epoch %d)", ci.epoch)) {
		t.Errorf("exec did not report the command's end with its epoch:\n%s", stderr.String())
	}
	if strings.Contains(quietErr.String(), "agent exec:") { // the command's own output may be there
		t.Errorf("exec -quiet wrote on stderr:\n%s", quietErr.String())
	}
}

// The reports are rate-limited: the same text again only after a minute,
// a changed one no sooner than execReportGap after the last of its kind.
func TestExecReportRateLimit(t *testing.T) {
	var out strings.Builder
	r := &execRunner{stderr: &out}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		kind, text string
		printed    bool
	}{
		{0, "wait", "n1 leads", true},
		{100 * time.Millisecond, "wait", "n1 leads", false},
		{execReportGap / 2, "wait", "n2 leads", false}, // changed, too soon
		{execReportGap, "wait", "n2 leads", true},
		{execReportGap + time.Second, "down", "unreachable", true}, // another kind
		{execReportGap + 2*time.Second, "wait", "n2 leads", true},  // the agent answers again
		{execReportGap + 2*time.Second + execReportRepeat - time.Millisecond, "wait", "n2 leads", false},
		{execReportGap + 2*time.Second + execReportRepeat, "wait", "n2 leads", true}, // a reminder
	}
	for i, s := range steps {
		before := out.Len()
		r.report(s.kind, s.text, t0.Add(s.at))
		if printed := out.Len() > before; printed != s.printed {
			t.Errorf("step %d (%s %q at %v): printed %v, want %v", i, s.kind, s.text, s.at, printed, s.printed)
		}
	}
	r.quiet = true
	r.report("wait", "something new", t0.Add(time.Hour))
	if strings.Contains(out.String(), "something new") {
		t.Error("-quiet printed a report")
	}
}
