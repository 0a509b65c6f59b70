package multihost

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols/observe"
)

func describe(st api.Status) string {
	return fmt.Sprintf("role=%s leader=%q epoch=%d leader_age_ms=%d", st.Role, st.Leader, st.Epoch, st.LeaderAgeMS)
}

// poll is one status answer with the instants the request started and the
// answer arrived: the agent computed it in between.
type poll struct {
	st         api.Status
	start, end time.Time
}

func (h *host) poll() (poll, error) {
	start := time.Now()
	st, err := h.status()
	return poll{st: st, start: start, end: time.Now()}, err
}

// TestObserversAcrossHosts is the observers' slow path (README, "Failure
// detection"; protocols/observe) on five namespaced hosts: n1–n3 vote in
// majority, n4 and n5 observe and learn leader and epoch only by gossip.
//
//   - SIGKILL of the leader: both observers report the new leader in a
//     higher epoch, and no answer of theirs goes back to a lower one.
//   - n4 restarted: no answer of the new process reports an epoch below
//     what the old one reported (the DATA_DIR/observed floor), and it names
//     either no leader or the current one.
//   - n5's link cut at the bridge (no FIN, no RST) just after it learned an
//     announcement: while cut it learns nothing, so every answer naming a
//     leader must carry a leader_age_ms at least the time since that
//     announcement reached it — it stops claiming a fresh leader. Plugged
//     back, it learns a fresh one.
//
// Only order and monotonicity are asserted; times are logged
// (docs/multihost.md).
func TestObserversAcrossHosts(t *testing.T) {
	c := newCluster(t, 5, "majority")
	c.voters = []string{"n1", "n2", "n3"}
	for _, h := range c.hosts {
		c.configure(h, h.id)
	}
	w := c.watch()
	rec := c.record(c.hosts...)
	started := time.Now()
	c.startAll()
	leader, epoch := c.waitAgreement(0)
	n4, n5 := c.host("n4"), c.host("n5")
	observers := []*host{n4, n5}
	for _, o := range observers {
		st, err := o.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Role != api.RoleObserver {
			t.Fatalf("%s: %s; want an observer", o.name, describe(st))
		}
		t.Logf("%s: %s", o.name, describe(st))
	}
	t.Logf("%s leads epoch %d, agreed by all five %v after the start", leader, epoch, time.Since(started).Round(time.Millisecond))

	// SIGKILL of the leader. Each observer is polled on its own until it
	// names another leader in a higher epoch.
	killed := time.Now()
	c.kill(c.host(leader))
	var wg sync.WaitGroup
	for _, o := range observers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last poll
			for time.Since(killed) < waitLimit {
				p, err := o.poll()
				if err != nil {
					t.Errorf("%s: %v", o.name, err)
					return
				}
				if p.st.Epoch < last.st.Epoch {
					t.Errorf("%s reported %s after %s", o.name, describe(p.st), describe(last.st))
					return
				}
				if p.st.Leader != "" && p.st.Leader != leader && p.st.Epoch > epoch {
					t.Logf("%s: %s, first reported %v after the kill; before it: %s", o.name, describe(p.st), p.end.Sub(killed).Round(time.Millisecond), describe(last.st))
					return
				}
				last = p
				time.Sleep(2 * time.Millisecond)
			}
			t.Errorf("%s: no new leader within %v of the kill; last %s", o.name, waitLimit, describe(last.st))
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	next, epoch2, took := c.leaderNotIn(c.live(), killed, leader)
	t.Logf("SIGKILL of %s: %s leads epoch %d, agreed by the 4 survivors %v after the kill", leader, next, epoch2, took.Round(time.Millisecond))

	// Restart n4: the new process must not report an epoch below what
	// the old one reported, and names no leader or the current one.
	before, err := n4.status()
	if err != nil {
		t.Fatal(err)
	}
	c.kill(n4)
	restarted := time.Now()
	c.start(n4)
	var first, named poll
	for named.end.IsZero() {
		if time.Since(restarted) > waitLimit {
			t.Fatalf("restarted n4 did not name %s within %v; its first answer: %s", next, waitLimit, describe(first.st))
		}
		p, err := n4.poll()
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue // not up yet
		}
		if first.end.IsZero() {
			first = p
		}
		if p.st.Epoch < before.Epoch {
			t.Fatalf("restarted n4 reported %s, below the epoch %d it reported before its restart", describe(p.st), before.Epoch)
		}
		if p.st.Leader != "" && p.st.Epoch == epoch2 && p.st.Leader != next {
			t.Fatalf("restarted n4 reported %s; %s leads epoch %d", describe(p.st), next, epoch2)
		}
		if p.st.Leader != "" {
			named = p
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("n4 before its restart: %s; its first answer after, %v after the start: %s; it named %s %v after the start (%s)",
		describe(before), first.end.Sub(restarted).Round(time.Millisecond), describe(first.st), next,
		named.end.Sub(restarted).Round(time.Millisecond), describe(named.st))

	// Cut n5 just after it learned an announcement, so that the next one
	// (observe.RefreshInterval later) cannot have reached it: its
	// knowledge is then no younger than that announcement's arrival.
	fresh, cut, strict := cutAfterAnnouncement(t, c, n5)
	const watchCut = 2*observe.RefreshInterval + 500*time.Millisecond
	var (
		last    poll
		answers int
		leaders int
	)
	for time.Since(cut) < watchCut {
		p, err := n5.poll()
		if err != nil {
			t.Fatalf("n5 cut off: %v", err)
		}
		answers++
		if p.st.Epoch < fresh.st.Epoch {
			t.Fatalf("n5 cut off reported %s, below the epoch %d it reported before", describe(p.st), fresh.st.Epoch)
		}
		if p.st.Leader != "" && strict {
			leaders++
			// The agent computed the age after p.start; its knowledge
			// is from before fresh.end.
			floor := p.start.Sub(fresh.end).Milliseconds()
			switch {
			case p.st.Leader != fresh.st.Leader || p.st.Epoch != fresh.st.Epoch:
				t.Fatalf("n5 cut off reported %s; it knew %s and cannot have learned more", describe(p.st), describe(fresh.st))
			case p.st.LeaderAgeMS < floor:
				t.Fatalf("n5 cut off reported %s, %v after the announcement it last learned reached it: its knowledge is older than it says", describe(p.st), p.start.Sub(fresh.end).Round(time.Millisecond))
			case last.st.Leader != "" && p.st.LeaderAgeMS < last.st.LeaderAgeMS:
				t.Fatalf("n5 cut off reported %s after %s: its knowledge got younger", describe(p.st), describe(last.st))
			}
		}
		last = p
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("n5 cut off for %v: %d answers, %d naming a leader; the last, %v after the cut: %s",
		watchCut, answers, leaders, last.end.Sub(cut).Round(time.Millisecond), describe(last.st))

	plugged := time.Now()
	if err := c.net.Plug(context.Background(), n5.name); err != nil {
		t.Fatal(err)
	}
	var back api.Status
	waitFor(t, "n5, plugged back, to learn a fresh announcement", func() (bool, string) {
		p, err := n5.poll()
		if err != nil {
			return false, err.Error()
		}
		back = p.st
		// Knowledge from before the plug is older than the time since.
		return p.st.Leader != "" && p.st.Epoch >= fresh.st.Epoch && p.st.LeaderAgeMS < p.start.Sub(plugged).Milliseconds(), describe(p.st)
	})
	t.Logf("n5 plugged back: %s, %v after the plug", describe(back), time.Since(plugged).Round(time.Millisecond))
	final, epoch3, _ := c.leaderNotIn(c.live(), time.Now(), leader)
	t.Logf("%s leads epoch %d, agreed by the 4 live hosts", final, epoch3)
	w.finish(t)
	rec.stop()
	rec.epochsNeverFall(t)
}

// cutAfterAnnouncement polls o until its leader_age_ms falls with the same
// leader and epoch (it learned a newer announcement), then unplugs its link
// at once. It returns the poll that showed the fresh announcement, when the
// cut was in place, and whether the cut came soon enough after it for the
// next announcement to be surely stopped. When it did not (a slow machine),
// it plugs the link back and tries again, up to five times, and then
// returns false.
func cutAfterAnnouncement(t *testing.T, c *cluster, o *host) (poll, time.Time, bool) {
	t.Helper()
	const tries = 5
	for try := 1; ; try++ {
		var fresh, prev poll
		waitFor(t, o.name+" to learn a new announcement", func() (bool, string) {
			p, err := o.poll()
			if err != nil {
				return false, err.Error()
			}
			same := p.st.Leader != "" && p.st.Leader == prev.st.Leader && p.st.Epoch == prev.st.Epoch
			if same && p.st.LeaderAgeMS < prev.st.LeaderAgeMS {
				fresh = p
				return true, ""
			}
			prev = p
			return false, describe(p.st)
		})
		if err := c.net.Unplug(context.Background(), o.name); err != nil {
			t.Fatal(err)
		}
		cut := time.Now()
		// The leader sent that announcement no earlier than fresh.start
		// minus its age and minus what the age does not count (transit,
		// the wait for the agent's loop), and sends the next one
		// RefreshInterval later (no member joins now to hasten it). Half
		// the interval is left for what the age does not count.
		sent := fresh.start.Add(-time.Duration(fresh.st.LeaderAgeMS) * time.Millisecond)
		if cut.Before(sent.Add(observe.RefreshInterval / 2)) {
			t.Logf("%s learned an announcement %v old at most %v before its link was cut (try %d)", o.name,
				time.Duration(fresh.st.LeaderAgeMS)*time.Millisecond, cut.Sub(fresh.start).Round(time.Millisecond), try)
			return fresh, cut, true
		}
		if try == tries {
			t.Logf("%s's link could not be cut within %v of an announcement in %d tries (the machine is too slow): its leader_age_ms is not checked while cut", o.name, observe.RefreshInterval/2, try)
			return fresh, cut, false
		}
		t.Logf("%s: cut %v after an announcement %v old; too late, plugging back", o.name, cut.Sub(fresh.start), time.Duration(fresh.st.LeaderAgeMS)*time.Millisecond)
		if err := c.net.Plug(context.Background(), o.name); err != nil {
			t.Fatal(err)
		}
	}
}
