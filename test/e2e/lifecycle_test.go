package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// TestSecondAgentOnSameDataDirRefuses starts a second agent on a running
// agent's data directory (other ports and socket): it must exit non-zero
// at once with an error that names the lock, and the first must go on.
func TestSecondAgentOnSameDataDirRefuses(t *testing.T) {
	c := newCluster(t, 1, "majority")
	c.startAll()
	nd := c.nodes[0]
	c.waitAgreement(0)

	args := append([]string(nil), nd.args...)
	args = append(args,
		fmt.Sprintf("-gossip.bind=127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("-transport.listen=/ip4/127.0.0.1/tcp/%d", freePort(t)),
		"-api.socket="+filepath.Join(c.dir, "second.sock"),
	)
	second := c.spawn("second", nil, args...)
	code := second.wait(t, exitWait)
	out := second.log()
	if code == 0 {
		t.Fatalf("second agent on %s exited 0, want an error; output:\n%s", nd.dataDir, out)
	}
	if !strings.Contains(out, "lock") || !strings.Contains(out, nd.dataDir) {
		t.Fatalf("second agent's error does not mention the lock and the directory %s:\n%s", nd.dataDir, out)
	}
	t.Logf("second agent exited %d: %s", code, lastLine(out))
	if _, err := os.Stat(filepath.Join(c.dir, "second.sock")); err == nil {
		t.Error("the refused agent left a socket behind")
	}
	if st, err := nd.status(); err != nil || st.Role != api.RoleLeader {
		t.Fatalf("first agent after the refusal: %+v, %v", st, err)
	}
}

// TestDevCluster runs `agent dev -nodes 3`: it must print the three socket
// paths, the agents behind them must elect a leader, and "quit" on
// standard input must stop it with exit code 0.
func TestDevCluster(t *testing.T) {
	dir := shortTempDir(t)
	cmd := exec.Command(agentBin, "dev", "-nodes", "3", "-dir", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more; drop
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	reaped := false
	defer func() {
		if !reaped {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	sockRE := regexp.MustCompile(`agent status -socket (\S+)`)
	var sockets []string
	var transcript strings.Builder
	deadline := time.After(electWait)
	for len(sockets) < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("agent dev ended early; stdout:\n%s\nstderr:\n%s", transcript.String(), stderr.String())
			}
			transcript.WriteString(l + "\n")
			if m := sockRE.FindStringSubmatch(l); m != nil {
				sockets = append(sockets, m[1])
			}
		case <-deadline:
			t.Fatalf("agent dev did not print three socket paths within %v; stdout:\n%s", electWait, transcript.String())
		}
	}
	t.Logf("agent dev sockets: %v", sockets)

	waitFor(t, electWait, "a leader all three dev agents agree on", func() (bool, string) {
		var leaders []string
		for _, s := range sockets {
			if !strings.HasPrefix(s, dir) {
				return false, fmt.Sprintf("socket %s not under -dir %s", s, dir)
			}
			cl := client.New(s)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cl.Status(ctx)
			cancel()
			cl.Close()
			if err != nil {
				return false, err.Error()
			}
			leaders = append(leaders, fmt.Sprintf("%s@%d", st.Leader, st.Epoch))
		}
		return leaders[0] != "@0" && leaders[0] == leaders[1] && leaders[1] == leaders[2], strings.Join(leaders, " ")
	})

	if _, err := io.WriteString(stdin, "quit\n"); err != nil {
		t.Fatal(err)
	}
	go func() { // keep draining so the dev cluster never blocks on stdout
		for range lines {
		}
	}()
	select {
	case err := <-exited:
		reaped = true
		if err != nil {
			t.Fatalf("agent dev after quit: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(exitWait):
		t.Fatalf("agent dev still running %v after quit", exitWait)
	}
}

// TestExampleConfigElectsN1 runs config.example.toml as shipped, from a
// copy in a fresh working directory: the single voter n1 must lead at once
// and `agent status -json` (default socket) must say so.
func TestExampleConfigElectsN1(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:7946", "127.0.0.1:7947"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("the example's fixed port %s is busy on this machine: %v", addr, err)
		}
		l.Close()
	}
	dir := shortTempDir(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "config.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.example.toml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{api.EnvSocket + "="} // the CLI must find the socket by its default
	p := startProc(t, "n1", dir, filepath.Join(dir, "n1.log"), env, "run", "-config", "config.example.toml")
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("---- log of n1 ----\n%s", tail(p.log(), 100))
		}
	})

	var st api.Status
	waitFor(t, electWait, "agent status -json to report n1 as leader", func() (bool, string) {
		if !p.running() {
			t.Fatalf("the agent exited: %v", p.err)
		}
		cmd := exec.Command(agentBin, "status", "-json")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("agent status -json printed %q: %v", out, err)
		}
		return st.Role == api.RoleLeader && st.Leader == "n1" && st.Node == "n1" && st.Epoch > 0, string(out)
	})
	t.Logf("example config: %s leads in epoch %d (lease %d ms)", st.Leader, st.Epoch, st.LeaseMS)
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
