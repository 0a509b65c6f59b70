package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/config"
)

// envWatchdogChild makes this test binary, started by exec as its
// command, a child that uses the watchdog exec gives it: it records its
// environment in os.Args[1]/env and sends WATCHDOG=1 five times a
// period until SIGTERM, on which it exits 7.
const envWatchdogChild = "CONCLAVE_TEST_WATCHDOG_CHILD"

func init() {
	// The guardian (guardian.go) is this binary too, with the variable
	// inherited: it must stay the guardian.
	if os.Getenv(envWatchdogChild) == "1" && os.Getenv(guardianEnv) != "1" {
		os.Exit(watchdogChild(os.Args[1]))
	}
}

func watchdogChild(dir string) int {
	line := strings.Join([]string{os.Getenv("CONCLAVE_EPOCH"), os.Getenv("CONCLAVE_LEADER"), strconv.Itoa(os.Getpid()),
		os.Getenv("CONCLAVE_ELECTION"), os.Getenv("NOTIFY_SOCKET"), os.Getenv("WATCHDOG_USEC"), os.Getenv("CONCLAVE_WATCHDOG_USEC")}, " ")
	if err := os.WriteFile(filepath.Join(dir, "env.tmp"), []byte(line), 0o600); err != nil {
		return 1
	}
	if err := os.Rename(filepath.Join(dir, "env.tmp"), filepath.Join(dir, "env")); err != nil {
		return 1
	}
	period, err := daemon.SdWatchdogEnabled(false)
	if err != nil || period <= 0 {
		return 3 // no watchdog: the test reads why from the env file
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	t := time.NewTicker(period / 5)
	defer t.Stop()
	for {
		select {
		case <-term:
			return 7
		case <-t.C:
			if _, err := daemon.SdNotify(false, "WATCHDOG=1"); err != nil {
				return 4
			}
		}
	}
}

// sessionExecCluster is three agents of protocol whose default election
// stands by sessions with session_ttl ttl, and whose election "other"
// stands always; exec holds a session on n1 and on n2, whose commands
// are watchdog children recording into dirs[0] and dirs[1].
func sessionExecCluster(t *testing.T, protocol string, ttl time.Duration) (tc *testCluster, dirs [2]string, stderr *[2]syncBuffer) {
	t.Helper()
	t.Setenv(envWatchdogChild, "1")
	always, noTTL := config.CandidacyAlways, config.Duration(0)
	tc = newTestClusterWith(t, 3, protocol, func(c *config.Config) {
		c.Election.Candidacy = config.CandidacySession
		c.Election.SessionTTL = config.Duration(ttl)
		c.Elections = map[string]config.NamedElection{"other": {Candidacy: &always, SessionTTL: &noTTL}}
	})
	stderr = new([2]syncBuffer)
	for i := range 2 {
		dirs[i] = t.TempDir()
		var stdout syncBuffer
		background(t, &stdout, &stderr[i], "exec", "-socket", tc.socket(i), "-grace", "1s", "--", os.Args[0], dirs[i])
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("n1's exec:\n%s\nn2's exec:\n%s", stderr[0].String(), stderr[1].String())
		}
	})
	return tc, dirs, stderr
}

// firstChild waits for one of the two commands to start and returns which
// and what it recorded.
func firstChild(t *testing.T, dirs [2]string) (int, []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "env")); err == nil {
				return i, strings.Fields(string(b))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no command started within 30s")
	return -1, nil
}

// waitLeads waits until every agent names node as the default election's
// leader, and returns when it saw that.
func (tc *testCluster) waitLeads(t *testing.T, node string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		all := true
		for i := range tc.agents {
			if st, err := tc.status(i); err != nil || st.Leader != node {
				all = false
				break
			}
		}
		if all {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not lead everywhere within %v", node, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// otherAt is the status of election "other" at the agent at sock.
func otherAt(t *testing.T, sock string) api.Status {
	t.Helper()
	c := client.New(sock).Election("other")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// (a) Killing the command on the leading host closes its session: the
// election moves to the host whose exec holds the other session, and
// that host's command starts.
func TestExecSessionKilledCommandHandsOver(t *testing.T) {
	const ttl = time.Second
	tc, dirs, _ := sessionExecCluster(t, config.ProtocolMajority, ttl)
	lead, env := firstChild(t, dirs)
	if len(env) != 7 {
		t.Fatalf("the command recorded %q; want epoch, leader, pid, election, NOTIFY_SOCKET, WATCHDOG_USEC, CONCLAVE_WATCHDOG_USEC", env)
	}
	half := strconv.FormatInt((ttl / 2).Microseconds(), 10)
	if env[1] != fmt.Sprintf("n%d", lead+1) || env[3] != api.DefaultElection || env[4] == "" || env[5] != half || env[6] != half {
		t.Errorf("the command's environment %q; want it led by n%d, election default, a NOTIFY_SOCKET and WATCHDOG_USEC=%s", env, lead+1, half)
	}
	pid, _ := strconv.Atoi(env[2])
	other := 1 - lead
	tc.waitLeads(t, fmt.Sprintf("n%d", lead+1), 20*time.Second)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	moved := tc.waitLeads(t, fmt.Sprintf("n%d", other+1), 30*time.Second)
	t.Logf("MEASURED kill -9 of the leader's command → n%d leads everywhere: %v (majority, election_timeout 500ms, session_ttl %v)", other+1, moved.Sub(killed).Round(time.Millisecond), ttl)
	if _, err := os.Stat(filepath.Join(dirs[other], "env")); err != nil {
		eventually(t, 20*time.Second, "the new leader's command starts", func() bool {
			_, err := os.Stat(filepath.Join(dirs[other], "env"))
			return err == nil
		})
	}
}

// (b) A command that stops checking in (SIGSTOP) lets its session
// expire: leadership moves to the other holder's host, while the same
// host's election "other" keeps its leader and epoch; exec says the
// session expired and stops the command.
func TestExecSessionStoppedCommandExpires(t *testing.T) {
	const ttl = time.Second
	// Bully: the same host's election "other" has a leader whether or
	// not its peers hear each other.
	tc, dirs, stderr := sessionExecCluster(t, config.ProtocolBully, ttl)
	lead, env := firstChild(t, dirs)
	pid, _ := strconv.Atoi(env[2])
	other := 1 - lead
	tc.waitLeads(t, fmt.Sprintf("n%d", lead+1), 20*time.Second)
	var before api.Status
	eventually(t, 20*time.Second, "election other has a leader on the leading host", func() bool {
		before = otherAt(t, tc.socket(lead))
		return before.Leader != ""
	})
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	moved := tc.waitLeads(t, fmt.Sprintf("n%d", other+1), 30*time.Second)
	t.Logf("MEASURED SIGSTOP of the leader's command → n%d leads everywhere: %v (bully, election_timeout 500ms, session_ttl %v)", other+1, moved.Sub(stopped).Round(time.Millisecond), ttl)
	if after := otherAt(t, tc.socket(lead)); after.Leader != before.Leader || after.Epoch != before.Epoch {
		t.Errorf("election other on n%d moved: %s epoch %d, was %s epoch %d", lead+1, after.Leader, after.Epoch, before.Leader, before.Epoch)
	}
	eventually(t, 10*time.Second, "exec says the session expired", func() bool {
		return strings.Contains(stderr[lead].String(), "expired: the command sent no WATCHDOG=1 within session_ttl")
	})
}
