package health

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor polls cond; the bound only keeps a broken test from hanging, it
// is not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startRunner(t *testing.T, specs ...CheckSpec) *Runner {
	t.Helper()
	r, err := NewRunner(specs)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func TestCommandCheckFallAndRise(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "up")
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, CheckSpec{Name: "svc", Command: []string{"test", "-e", flag},
		Interval: 10 * time.Millisecond, Timeout: 5 * time.Second, Fall: 3, Rise: 2})
	waitFor(t, "passing", r.Passing)
	<-r.Changed()

	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	before := r.Snapshot()[0].Failures
	waitFor(t, "failing", func() bool { return r.Snapshot()[0].Status == StatusFailing })
	if s := r.Snapshot()[0]; s.Failures-before < 3 {
		t.Fatalf("failing after %d failures, fall is 3: %+v", s.Failures-before, s)
	}
	select {
	case <-r.Changed():
	case <-time.After(20 * time.Second):
		t.Fatal("no change notified")
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	passes := r.Snapshot()[0].Passes
	waitFor(t, "passing again", r.Passing)
	if s := r.Snapshot()[0]; s.Passes-passes < 2 {
		t.Fatalf("passing after %d passes, rise is 2: %+v", s.Passes-passes, s)
	}
}

func TestPendingCheckIsNotPassing(t *testing.T) {
	r, err := NewRunner([]CheckSpec{{Name: "x", Command: []string{"true"}, Interval: time.Hour, Timeout: time.Second, Fall: 1, Rise: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Passing() || r.Snapshot()[0].Status != StatusPending {
		t.Fatalf("before any run: %+v", r.Snapshot())
	}
	empty, _ := NewRunner(nil)
	if !empty.Passing() {
		t.Fatal("no checks: not passing")
	}
}

func TestCheckTimeoutKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "survived")
	// The child of the shell would write marker if it outlived the kill.
	script := fmt.Sprintf("(sleep 1; touch %s) & sleep 30", marker)
	r := startRunner(t, CheckSpec{Name: "slow", Command: []string{"sh", "-c", script},
		Interval: 200 * time.Millisecond, Timeout: 100 * time.Millisecond, Fall: 1, Rise: 1})
	waitFor(t, "failing", func() bool { return r.Snapshot()[0].Status == StatusFailing })
	if out := r.Snapshot()[0].Output; !strings.Contains(out, "timed out") {
		t.Fatalf("output %q does not say it timed out", out)
	}
	r.Close()
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the check's child outlived the timeout")
	}
}

func TestCheckOutputIsBounded(t *testing.T) {
	r := startRunner(t, CheckSpec{Name: "noisy", Command: []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; echo END; exit 3"},
		Interval: time.Hour, Timeout: 10 * time.Second, Fall: 1, Rise: 1})
	waitFor(t, "a run", func() bool { return r.Snapshot()[0].Status != StatusPending })
	s := r.Snapshot()[0]
	if s.Status != StatusFailing || len(s.Output) > MaxOutput+100 || !strings.Contains(s.Output, "END") || !strings.Contains(s.Output, "exit status 3") {
		t.Fatalf("%s, %d bytes of output ending %q", s.Status, len(s.Output), s.Output[max(0, len(s.Output)-60):])
	}
}

func TestHTTPCheck(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "db down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()
	r := startRunner(t, CheckSpec{Name: "web", HTTP: srv.URL, Interval: 10 * time.Millisecond, Timeout: 5 * time.Second, Fall: 1, Rise: 1})
	waitFor(t, "passing", r.Passing)
	healthy.Store(false)
	waitFor(t, "failing", func() bool { return r.Snapshot()[0].Status == StatusFailing })
	if out := r.Snapshot()[0].Output; !strings.Contains(out, "503") || !strings.Contains(out, "db down") {
		t.Fatalf("output %q", out)
	}
	r.Close()
	srv.CloseClientConnections()
}

func TestMaintRecord(t *testing.T) {
	dir := t.TempDir()
	if _, on, err := ReadMaint(dir); on || err != nil {
		t.Fatalf("fresh dir: on=%v err=%v", on, err)
	}
	m := Maint{Reason: "kernel upgrade", Since: time.Unix(1700000000, 0).UTC()}
	if err := WriteMaint(dir, m); err != nil {
		t.Fatal(err)
	}
	got, on, err := ReadMaint(dir)
	if !on || err != nil || got != m {
		t.Fatalf("read back %+v on=%v err=%v", got, on, err)
	}
	if err := ClearMaint(dir); err != nil {
		t.Fatal(err)
	}
	if _, on, _ := ReadMaint(dir); on {
		t.Fatal("still in maintenance after ClearMaint")
	}
	for _, bad := range []string{strings.Repeat("x", MaxReason+1), "a\nb", "\xff"} {
		if err := WriteMaint(dir, Maint{Reason: bad}); err == nil {
			t.Errorf("reason %q accepted", bad)
		}
	}
	// A hostile or broken record is an error, never "not in maintenance".
	path := filepath.Join(dir, MaintFile)
	for _, content := range []string{strings.Repeat("x", 5000), "{not json", `{"reason":"a\u0007"}`} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadMaint(dir); err == nil {
			t.Errorf("record %.20q read without error", content)
		}
	}
	os.Remove(path)
	if err := os.Symlink("/etc/passwd", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadMaint(dir); err == nil {
		t.Error("a symlinked record was followed")
	}
}

func TestHooksRunWithTheTransitionInTheirEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	h := NewHooks("default", []HookSpec{
		{On: OnLeader, Command: []string{"sh", "-c", "echo $CONCLAVE_ROLE $CONCLAVE_LEADER $CONCLAVE_EPOCH >> " + out}, Timeout: 10 * time.Second},
		{On: OnNoLeader, Command: []string{"false"}, Timeout: 10 * time.Second},
		{On: OnNoLeader, Command: []string{"sleep", "30"}, Timeout: 50 * time.Millisecond},
	}, nil)
	defer h.Close()
	h.Fire(Transition{On: OnFollower, Epoch: 6, Leader: "n2", Role: "follower"}) // no hook on follower
	h.Fire(Transition{On: OnLeader, Epoch: 7, Leader: "n1", Role: "leader"})
	h.Fire(Transition{On: OnNoLeader, Epoch: 7, Role: "follower"})
	waitFor(t, "three runs", func() bool { return h.Stats().Runs == 3 })
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "leader n1 7\n" {
		t.Fatalf("hook wrote %q (%v)", b, err)
	}
	if st := h.Stats(); st.Failures != 2 {
		t.Fatalf("stats %v: the failing and the timed-out hook must count as failures", st)
	}
}

func TestHooksNeverBlockTheCaller(t *testing.T) {
	h := NewHooks("default", []HookSpec{{On: OnLeader, Command: []string{"sleep", "30"}, Timeout: 30 * time.Second}}, nil)
	for i := range 100 {
		h.Fire(Transition{On: OnLeader, Epoch: uint64(i)})
	}
	if st := h.Stats(); st.Dropped < 100-hookQueue-1 {
		t.Fatalf("stats %v: the queue must stay bounded", st)
	}
	h.Close() // kills the running hook
}
