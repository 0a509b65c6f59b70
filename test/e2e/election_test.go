package e2e

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// highest returns the name of the live node with the highest id.
func highest(nodes []*node) string {
	best := nodes[0]
	for _, nd := range nodes[1:] {
		if nd.id > best.id {
			best = nd
		}
	}
	return best.name
}

// TestElectionAndFailover starts five agents of each protocol, checks that
// they agree on the expected leader (bully and ring: the highest id;
// majority: any), SIGKILLs the leader and checks that every survivor
// reports the same new leader with a higher epoch.
func TestElectionAndFailover(t *testing.T) {
	for _, protocol := range []string{"majority", "bully", "ring"} {
		t.Run(protocol, func(t *testing.T) {
			c := newCluster(t, 5, protocol)
			c.startAll()
			want := "" // majority: any node, as long as all agree
			if protocol != "majority" {
				want = highest(c.live())
			}
			first := c.waitLeader(0, want)
			t.Logf("%s: %s leads in epoch %d", protocol, first.leader, first.epoch)

			old := c.byName(first.leader)
			old.p.signal(t, syscall.SIGKILL)
			old.p.wait(t, exitWait)
			killed := time.Now()

			if protocol != "majority" {
				want = highest(c.live())
			}
			second := c.waitLeader(first.epoch, want)
			t.Logf("%s: after SIGKILL of %s, %s leads in epoch %d (agreed after %v)",
				protocol, first.leader, second.leader, second.epoch, time.Since(killed).Round(time.Millisecond))
			if second.leader == first.leader {
				t.Fatalf("the killed %s is still reported leader", first.leader)
			}

			// The killed agent restarts from its data directory, before
			// gossip has declared it dead: it must rejoin, and in bully
			// and ring (preempt on by default) take the lead back.
			c.start(slices.Index(c.nodes, old))
			if protocol != "majority" {
				want = highest(c.live())
			}
			third := c.waitLeader(second.epoch-1, want)
			if third.epoch < second.epoch {
				t.Fatalf("epoch went back from %d to %d", second.epoch, third.epoch)
			}
			t.Logf("%s: %s restarted; %s leads in epoch %d", protocol, old.name, third.leader, third.epoch)
		})
	}
}

// TestPausedLeaderIsReplacedAndNeverClaimsOldEpoch SIGSTOPs a majority
// leader beyond its election timeout and lease, waits for the others to
// elect a new leader, then SIGCONTs it. Status requests queued on its
// socket while it was stopped, and every request after, must never show
// it as leader of its old epoch: its lease ran out while it slept.
func TestPausedLeaderIsReplacedAndNeverClaimsOldEpoch(t *testing.T) {
	c := newCluster(t, 3, "majority")
	c.startAll()
	first := c.waitAgreement(0)
	old := c.byName(first.leader)
	var others []*node
	for _, nd := range c.nodes {
		if nd != old {
			others = append(others, nd)
		}
	}

	old.p.signal(t, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			old.p.signal(t, syscall.SIGCONT)
		}
	}()

	var second agreement
	waitFor(t, electWait, "a new leader among the running agents", func() (bool, string) {
		a, why := agreed(others, first.epoch)
		second = a
		return why == "", why
	})
	t.Logf("%s paused in epoch %d; %s leads in epoch %d", old.name, first.epoch, second.leader, second.epoch)

	// Requests sent while it is stopped wait in the socket's backlog and
	// are the first thing it answers after SIGCONT.
	type answer struct {
		st  api.Status
		err error
	}
	queued := make(chan answer, 4)
	for range cap(queued) {
		go func() {
			st, err := old.status()
			queued <- answer{st, err}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the requests reach the socket (not a timing assertion)
	old.p.signal(t, syscall.SIGCONT)
	stopped = false

	check := func(st api.Status, when string) {
		t.Helper()
		if st.Role == api.RoleLeader && st.Epoch <= first.epoch {
			t.Fatalf("%s: resumed %s says role=leader in its old epoch %d (%+v)", when, old.name, st.Epoch, st)
		}
	}
	answered := 0
	for range cap(queued) {
		a := <-queued
		if a.err == nil {
			answered++
			check(a.st, "request queued during the pause")
		}
	}
	// Then poll until it follows the new leader, and a while more.
	deadline := time.Now().Add(electWait)
	following := 0
	for following < 20 {
		st, err := old.status()
		if err == nil {
			answered++
			check(st, "poll after SIGCONT")
			if st.Epoch >= second.epoch && st.Role != api.RoleLeader {
				following++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed %s did not settle as a follower of epoch ≥ %d within %v (last: %+v, %v)", old.name, second.epoch, electWait, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if answered == 0 {
		t.Fatal("the resumed agent never answered")
	}
	final := c.waitAgreement(first.epoch)
	t.Logf("after resume: %s leads in epoch %d; %d answers checked", final.leader, final.epoch, answered)
}

// TestGracefulStopHandsOver sends SIGTERM to a majority leader: it must
// exit 0 within a bounded time and another node must lead.
func TestGracefulStopHandsOver(t *testing.T) {
	c := newCluster(t, 3, "majority")
	c.startAll()
	first := c.waitAgreement(0)
	old := c.byName(first.leader)
	old.p.signal(t, syscall.SIGTERM)
	if code := old.p.wait(t, exitWait); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", old.name, code)
	}
	second := c.waitAgreement(first.epoch)
	if second.leader == old.name {
		t.Fatalf("stopped %s still reported leader", old.name)
	}
	t.Logf("SIGTERM to %s (epoch %d): %s leads in epoch %d", old.name, first.epoch, second.leader, second.epoch)
	if log := old.p.log(); !strings.Contains(log, "handing leadership over") {
		t.Errorf("the leader's log does not mention the handover:\n%s", tail(log, 20))
	}
}

// TestRingFailoverDoesNotWaitForGossip kills a fresh ring leader at once,
// possibly before its first heartbeat reached anyone, with gossip in the
// "wan" profile (memberlist then takes about 20 s or more to declare a
// node dead). The survivors must route the election around the dead
// leader on their own failure detectors and agree on a new leader within
// ringWait. Regression: followers that had learned the leader only from
// its LEADER announcement had no detector for it, so they sent election
// messages to the dead node until gossip declared it dead.
func TestRingFailoverDoesNotWaitForGossip(t *testing.T) {
	const ringWait = 12 * time.Second // well below the wan profile's dead declaration
	c := newCluster(t, 5, "ring", "-gossip.profile=wan")
	c.startAll()
	first := c.waitLeader(0, "n5")
	c.byName(first.leader).p.signal(t, syscall.SIGKILL)
	killed := time.Now()
	survivors := c.nodes[:4]
	var second agreement
	waitFor(t, ringWait, "the survivors agree on n4 before gossip declares n5 dead", func() (bool, string) {
		a, why := agreed(survivors, first.epoch)
		second = a
		if why == "" && a.leader != "n4" {
			return false, "they agree on " + a.leader
		}
		return why == "", why
	})
	t.Logf("ring with wan gossip: %s leads in epoch %d, agreed %v after the SIGKILL", second.leader, second.epoch, time.Since(killed).Round(time.Millisecond))
}
