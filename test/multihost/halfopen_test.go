package multihost

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"
)

// halfOpenTrials is how many links TestHalfOpenDetected takes down, the
// leader's and a follower's in turn: two in CI, 20 for the figures of
// docs/multihost.md ("Half-open links").
var halfOpenTrials = flag.Int("halfopen-trials", 2, "links TestHalfOpenDetected takes down, leader and follower in turn (20 for docs/multihost.md)")

// TestHalfOpenDetected takes a host's link down at the bridge — no FIN,
// no RST, its packets just stop — and measures how long each host that
// sends to it takes to count it unreachable (its status's
// quorum.reachable drops): both followers when the leader's link goes,
// the leader when a follower's does. The followers do not send to each
// other, and probe each other only at the slow speed, so they are not
// timed. The link is plugged back and the cluster must agree again
// before the next trial.
func TestHalfOpenDetected(t *testing.T) {
	c := newCluster(t, 3, "majority")
	c.startAll()
	var leaderGone, followerGone []time.Duration
	for trial := range *halfOpenTrials {
		leader, _ := c.waitAgreement(0)
		var gone *host
		var watchers []*host
		for _, h := range c.hosts {
			switch {
			case trial%2 == 0 && h.name == leader, trial%2 == 1 && h.name != leader && gone == nil:
				gone = h
			}
		}
		for _, h := range c.hosts {
			if h == gone {
				continue
			}
			if trial%2 == 0 || h.name == leader {
				watchers = append(watchers, h)
			}
		}
		for _, h := range watchers {
			waitFor(t, h.name+" to reach all three voters", func() (bool, string) {
				st, err := h.status()
				return err == nil && st.Quorum.Reachable == 3, fmt.Sprintf("quorum %+v, %v", st.Quorum, err)
			})
		}
		unplugged := time.Now()
		if err := c.net.Unplug(context.Background(), gone.name); err != nil {
			t.Fatal(err)
		}
		seen := map[string]time.Duration{}
		deadline := unplugged.Add(waitLimit)
		for len(seen) < len(watchers) {
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: %s unplugged; within %v only %v counted it unreachable", trial+1, gone.name, waitLimit, seen)
			}
			for _, h := range watchers {
				if _, ok := seen[h.name]; ok {
					continue
				}
				if st, err := h.status(); err == nil && st.Quorum.Reachable < 3 {
					seen[h.name] = time.Since(unplugged)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		role := "follower"
		if gone.name == leader {
			role = "leader"
		}
		for _, h := range watchers {
			if role == "leader" {
				leaderGone = append(leaderGone, seen[h.name])
			} else {
				followerGone = append(followerGone, seen[h.name])
			}
		}
		t.Logf("trial %d: %s (the %s) unplugged; counted unreachable after %v", trial+1, gone.name, role, seen)
		if err := c.net.Plug(context.Background(), gone.name); err != nil {
			t.Fatal(err)
		}
		c.rejoin(gone, time.Now())
	}
	t.Logf("leader unplugged: each follower counted it unreachable after %s", summary(leaderGone))
	t.Logf("follower unplugged: the leader counted it unreachable after %s", summary(followerGone))
	t.Logf("all: %s", summary(append(leaderGone, followerGone...)))
}
