package multihost

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMeasureStalls measures majority's failover under recurring
// whole-process stalls on namespaced hosts: the leader is killed with
// SIGKILL and, from that instant, every survivor's agent is stopped with
// SIGSTOP for CONCLAVE_MULTIHOST_STALL (default 500ms) out of every
// CONCLAVE_MULTIHOST_STALL_EVERY (default 600ms), all at once, as a host
// group starved by its hypervisor is, until the survivors agree on a new
// leader. The figure is the time from the kill to that agreement. The
// simulator's version of the same fault is electcost's -stall and
// -stall-every (docs/majority-stalls.md).
//
//	CONCLAVE_MULTIHOST_MEASURE=1 CONCLAVE_MULTIHOST_BASELINE=/path/to/older/agent \
//	  go test -count=1 -v -timeout 60m -run TestMeasureStalls ./test/multihost
//
// The baseline build runs first in each round, then this one, so both see
// the same machine. CONCLAVE_MULTIHOST_ROUNDS overrides the 10 failovers
// per cluster size and build. Without the variables the test skips: it
// takes minutes, and its figures are not asserted.
func TestMeasureStalls(t *testing.T) {
	baseline := measureBaseline(t)
	needHosts(t)
	rounds := 10
	if v, err := strconv.Atoi(os.Getenv("CONCLAVE_MULTIHOST_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	stall := envDuration("CONCLAVE_MULTIHOST_STALL", 500*time.Millisecond)
	every := envDuration("CONCLAVE_MULTIHOST_STALL_EVERY", 600*time.Millisecond)
	if every <= stall {
		t.Fatalf("CONCLAVE_MULTIHOST_STALL_EVERY (%v) must exceed CONCLAVE_MULTIHOST_STALL (%v): the agents must run between stalls", every, stall)
	}
	loadBefore := loadavg()
	var rows []string
	for _, size := range []int{3, 5} {
		for _, build := range []string{"baseline", "this"} {
			s := &series{name: fmt.Sprintf("%d hosts, %s: SIGKILL of the leader to agreement", size, build)}
			c := newCluster(t, size, "majority")
			if build == "baseline" {
				c.bin = baseline
			}
			c.startAll()
			c.waitAgreement(0)
			for r := range rounds {
				leader, epoch := c.waitAgreement(0)
				old := c.host(leader)
				killed := time.Now()
				c.kill(old)
				survivors := c.live()
				stop := stallTogether(t, survivors, stall, every)
				_, took := c.newLeaderAmong(survivors, leader, killed)
				stop()
				s.add(took)
				t.Logf("%d hosts %s round %d: %s (epoch %d) killed, survivors agreed after %v", size, build, r+1, leader, epoch, took)
				c.start(old)
				c.rejoin(old, time.Now())
			}
			c.close()
			rows = append(rows, s.String())
		}
	}
	table := "| what | n | median | p90 | worst |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n") +
		fmt.Sprintf("\n\nstall %v every %v; load average (1, 5, 15 min) before: %s; after: %s\n", stall, every, loadBefore, loadavg())
	t.Logf("\n%s", table)
}

// stallTogether stops every host's agent for stall out of every period,
// all at once, until the returned function is called; that function
// leaves every agent running.
func stallTogether(t *testing.T, hs []*host, stall, period time.Duration) func() {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	signal := func(sig syscall.Signal) {
		for _, h := range hs {
			if h.running() {
				_ = h.cmd.Process.Signal(sig)
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer signal(syscall.SIGCONT)
		for {
			signal(syscall.SIGSTOP)
			select {
			case <-done:
				return
			case <-time.After(stall):
			}
			signal(syscall.SIGCONT)
			select {
			case <-done:
				return
			case <-time.After(period - stall):
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
