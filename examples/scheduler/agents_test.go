package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/loopback"
)

// The tests below run the scheduler as real processes beside three real
// agents (agent run), against the PostgreSQL server named by
// $CONCLAVE_TEST_POSTGRES, and freeze the leading host: its agent and its
// replica get SIGSTOP, another agent is elected, then the replica alone is
// resumed — it still believes it leads, as a paused process would. The
// replica processes are this test binary (see TestMain).

// childEnv makes the test binary run as the scheduler.
const childEnv = "CONCLAVE_SCHEDULER_CHILD"

func TestFrozenLeaderPostgres(t *testing.T) {
	res := runFreeze(t, true)
	if res.stale != 0 || res.dups != 0 {
		t.Fatalf("fenced run: %d stale jobs, %d duplicated ticks; jobs:\n%s", res.stale, res.dups, res.jobs)
	}
	if !strings.Contains(res.woken, `"result":"stale"`) {
		t.Fatalf("woken replica's write: %s, want result stale", res.woken)
	}
}

// TestFrozenLeaderPostgresControl is the control run: without the fencing
// check and the UNIQUE key, the same freeze must leave a stale job behind.
func TestFrozenLeaderPostgresControl(t *testing.T) {
	res := runFreeze(t, false)
	if res.stale == 0 {
		t.Fatalf("control run found no stale job; woken replica said %s; jobs:\n%s", res.woken, res.jobs)
	}
	t.Logf("control run found %d stale jobs and %d duplicated ticks (fencing off)", res.stale, res.dups)
}

type freezeResult struct {
	stale, dups int
	woken       string // the resumed replica's first write event
	jobs        string
}

func runFreeze(t *testing.T, fenced bool) freezeResult {
	if testing.Short() {
		t.Skip("runs real agents and replicas for about 15 s; skipped with -short")
	}
	st := stores(t)["postgres"]
	if st.pgDSN == "" {
		t.Skip("PostgreSQL not tested: CONCLAVE_TEST_POSTGRES is not set (eval \"$(bash scripts/databases start)\" sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	agentBin := agentBinary(t)
	dir := t.TempDir()

	names := []string{"n1", "n2", "n3"}
	gossip := map[string]int{}
	for _, n := range names {
		gossip[n] = freePort(t)
	}
	agents := map[string]*exec.Cmd{}
	sockets := map[string]string{}
	for i, n := range names {
		d := filepath.Join(dir, n)
		join := ""
		if i > 0 {
			join = fmt.Sprintf("join = [\"127.0.0.1:%d\"]", gossip["n1"])
		}
		sockets[n] = filepath.Join(d, "agent.sock")
		cfg := fmt.Sprintf(`[node]
name = %q
id = %d
data_dir = %q
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
%s
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
protocol = "majority"
voters = ["n1", "n2", "n3"]
[api]
socket = %q
`, n, i+1, d, gossip[n], join, freePort(t), sockets[n])
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(d, "agent.toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		agents[n] = startProcess(t, agentBin, []string{"run", "-config", path}, filepath.Join(d, "agent.log"), nil)
	}

	args := []string{"-postgres", st.pgDSN}
	if !fenced {
		args = append(args, "-fence=false", "-unique=false")
	}
	reps := map[string]*replica{}
	for _, n := range names {
		reps[n] = superviseReplica(ctx, t, n, append([]string{"-socket", sockets[n]}, args...))
	}

	leaderOf := func() string {
		for _, n := range names {
			sctx, c := context.WithTimeout(ctx, time.Second)
			s, err := client.New(sockets[n]).Status(sctx)
			c()
			if err == nil && s.IsLeader() {
				return n
			}
		}
		return ""
	}
	lead := ""
	waitUntil(t, ctx, "a leader's replica to write a job", func() bool {
		lead = leaderOf()
		return lead != "" && reps[lead].count(`"ev":"write","`) > 0
	})
	// Freeze right after a write: the next transaction is a second away,
	// so the frozen replica holds no lock the new leader's raise must wait for.
	old := lead
	writes := reps[old].count(`"ev":"write","`)
	waitUntil(t, ctx, "the next write", func() bool { return reps[old].count(`"ev":"write","`) > writes })
	oldPID := reps[old].pid()
	if err := syscall.Kill(oldPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := agents[old].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("froze %s (agent and replica pid %d)", old, oldPID)

	var newLead string
	waitUntil(t, ctx, "a new leader's replica to write", func() bool {
		for _, n := range names {
			if n != old && reps[n].count(`"result":"accepted"`) > 0 && reps[n].count(`"ev":"leader"`) > 0 {
				newLead = n
				return true
			}
		}
		return false
	})
	before := reps[old].count(`"ev":"write","`)
	if err := syscall.Kill(oldPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var woken string
	waitUntil(t, ctx, "the woken replica's write", func() bool {
		woken = reps[old].nth(`"ev":"write","`, before)
		return woken != ""
	})
	if err := agents[old].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %s; woken %s wrote: %s", newLead, old, woken)
	// Let the woken agent rejoin and its replica exit as a follower.
	waitUntil(t, ctx, "the woken replica to exit", func() bool { return reps[old].count(`"ev":"exit"`) > 0 })
	cancel()
	for _, r := range reps {
		r.wait()
	}

	db, err := sql.Open("pgx", st.pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res freezeResult
	res.woken = woken
	// Stale: a job whose epoch is lower than that of a job for an earlier
	// or the same tick — written by a leader after a newer one had written.
	q := `SELECT count(*) FROM jobs j WHERE EXISTS
		(SELECT 1 FROM jobs k WHERE k.tick <= j.tick AND k.epoch > j.epoch)`
	if err := db.QueryRow(q).Scan(&res.stale); err != nil {
		t.Fatal(err)
	}
	q = `SELECT count(*) FROM (SELECT tick FROM jobs GROUP BY tick HAVING count(*) > 1) d`
	if err := db.QueryRow(q).Scan(&res.dups); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT tick, epoch, node FROM jobs ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var tick, epoch int64
		var node string
		if err := rows.Scan(&tick, &epoch, &node); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "  tick %d epoch %d %s\n", tick, epoch, node)
	}
	res.jobs = sb.String()
	return res
}

func agentBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CONCLAVE_AGENT_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "agent")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/agent")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agent: %v\n%s", err, b)
	}
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProcess starts bin; it is killed (SIGCONT first, in case it is
// frozen) at the end of the test.
func startProcess(t *testing.T, bin string, args []string, logPath string, env []string) *exec.Cmd {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
	return cmd
}

// replica keeps one scheduler process running beside an agent, restarting
// it when it exits (as its supervisor would), and keeps its output lines.
type replica struct {
	mu    sync.Mutex
	lines []string
	cur   *exec.Cmd
	done  chan struct{}
}

func superviseReplica(ctx context.Context, t *testing.T, name string, args []string) *replica {
	r := &replica{done: make(chan struct{})}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			cmd := exec.Command(self, args...)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Errorf("replica %s: %v", name, err)
				return
			}
			if err := cmd.Start(); err != nil {
				t.Errorf("replica %s: %v", name, err)
				return
			}
			r.mu.Lock()
			r.cur = cmd
			r.mu.Unlock()
			stopped := make(chan struct{})
			go func() {
				select {
				case <-ctx.Done():
					_ = cmd.Process.Signal(syscall.SIGCONT)
					_ = cmd.Process.Signal(syscall.SIGTERM)
				case <-stopped:
				}
			}()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var ev Event
				line := sc.Text()
				if json.Unmarshal([]byte(line), &ev) == nil {
					r.mu.Lock()
					r.lines = append(r.lines, line)
					r.mu.Unlock()
				}
			}
			_ = cmd.Wait()
			close(stopped)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return r
}

func (r *replica) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// nth returns the i-th line (from 0) containing sub, or "".
func (r *replica) nth(sub string, i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			if i == 0 {
				return l
			}
			i--
		}
	}
	return ""
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Process.Pid
}

func (r *replica) wait() { <-r.done }

func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's time", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
