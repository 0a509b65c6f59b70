package multihost

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// withFailFileCheck gives every host of c a command check that fails
// while the file fail exists in its data directory, and rewrites the
// config files. It returns the file's path on each host.
func withFailFileCheck(c *cluster) map[string]string {
	paths := map[string]string{}
	for _, h := range c.hosts {
		p := filepath.Join(h.dir, "fail")
		paths[h.name] = p
		h.extra = fmt.Sprintf(`[[check]]
name = "svc"
command = ["/bin/sh", "-c", "! test -e %s"]
interval = "200ms"
timeout = "200ms"
`, p)
		c.configure(h, h.id)
	}
	return paths
}

// waitHealth waits until h's status reports health status want.
func waitHealth(t testing.TB, h *host, want string) api.Status {
	t.Helper()
	var st api.Status
	waitFor(t, h.name+" to report health "+want, func() (bool, string) {
		var err error
		st, err = h.status()
		if err != nil {
			return false, err.Error()
		}
		if st.Health == nil {
			return false, "no health in its status"
		}
		return st.Health.Status == want, fmt.Sprintf("health %+v", *st.Health)
	})
	return st
}

// TestHealthAcrossHosts is health-gated leadership's first demonstration on namespaced
// hosts with wildcard binds and the shipped election timings: the
// leader's check fails and another host leads; `agent maint on`, run on
// the new leader's host, moves leadership to the third; with both cleared,
// SIGKILL of the leader elects one of the other two. Throughout, no host
// may say it leads while its health is not passing (unless it says no
// healthy voter can take over), and no epoch may have two leaders. Times
// are logged, not asserted.
func TestHealthAcrossHosts(t *testing.T) {
	c := newCluster(t, 3, "majority")
	fail := withFailFileCheck(c)
	w := c.watch()
	started := time.Now()
	c.startAll()
	first, epoch, took := c.leaderNotIn(c.hosts, started)
	t.Logf("start: %s leads epoch %d, agreed %v after the start", first, epoch, took.Round(time.Millisecond))
	for _, h := range c.hosts {
		waitHealth(t, h, api.HealthPassing)
	}

	// The leader's service fails.
	if err := os.WriteFile(fail[first], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	failed := time.Now()
	second, epoch, took := c.leaderNotIn(c.hosts, failed, first)
	t.Logf("check failed on %s: %s leads epoch %d, agreed by all three %v later", first, second, epoch, took.Round(time.Millisecond))
	waitHealth(t, c.host(first), api.HealthFailing)

	// Maintenance, by the CLI on the new leader's host.
	maintOn := time.Now()
	out, err := c.cli(c.host(second), "maint", "on", "-reason", "kernel upgrade")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent maint on, on %s: %s", second, strings.TrimSpace(out))
	third, epoch, took := c.leaderNotIn(c.hosts, maintOn, first, second)
	t.Logf("%s in maintenance: %s leads epoch %d, agreed by all three %v after the command started", second, third, epoch, took.Round(time.Millisecond))
	st := waitHealth(t, c.host(second), api.HealthMaintenance)
	if st.Health.Maintenance == nil || st.Health.Maintenance.Reason != "kernel upgrade" {
		t.Errorf("%s in maintenance without its reason: %+v", second, st.Health.Maintenance)
	}
	if out, err := c.cli(c.host(second), "status"); err != nil || !strings.Contains(out, "kernel upgrade") {
		t.Errorf("agent status on %s does not show the maintenance reason: %v\n%s", second, err, out)
	}

	// Both cleared: every host is a candidate again.
	if err := os.Remove(fail[first]); err != nil {
		t.Fatal(err)
	}
	if out, err := c.cli(c.host(second), "maint", "off"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("agent maint off, on %s: %s", second, strings.TrimSpace(out))
	}
	for _, h := range c.hosts {
		waitHealth(t, h, api.HealthPassing)
	}

	leader, _, _ := c.leaderNotIn(c.hosts, time.Now())
	old := c.host(leader)
	killed := time.Now()
	c.kill(old)
	next, epoch, took := c.leaderNotIn(c.live(), killed, leader)
	t.Logf("SIGKILL of %s: %s leads epoch %d, agreed by both survivors %v later", leader, next, epoch, took.Round(time.Millisecond))
	w.finish(t)
}
