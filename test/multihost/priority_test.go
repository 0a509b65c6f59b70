package multihost

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// preemptDelay is election.preempt_delay in TestPreferredNodeAcrossHosts:
// short enough for CI, long enough that a takeover inside it shows.
const preemptDelay = time.Second

// leaderIs polls hs until every one of them names name as leader in one
// epoch above minEpoch and name (one of hs) says it leads. It returns the
// epoch and the time from since.
func (c *cluster) leaderIs(hs []*host, name string, minEpoch uint64, since time.Time) (uint64, time.Duration) {
	c.t.Helper()
	var epoch uint64
	waitFor(c.t, fmt.Sprintf("every host to name %s leader above epoch %d", name, minEpoch), func() (bool, string) {
		var desc strings.Builder
		ok := true
		epoch = 0
		for _, h := range hs {
			st, err := h.status()
			if err != nil {
				fmt.Fprintf(&desc, "%s: %v; ", h.name, err)
				ok = false
				continue
			}
			fmt.Fprintf(&desc, "%s: role=%s leader=%q epoch=%d; ", h.name, st.Role, st.Leader, st.Epoch)
			if epoch == 0 {
				epoch = st.Epoch
			}
			if st.Leader != name || st.Epoch != epoch || st.Epoch <= minEpoch || (h.name == name && st.Role != api.RoleLeader) {
				ok = false
			}
		}
		return ok, desc.String()
	})
	return epoch, time.Since(since)
}

// TestPreferredNodeAcrossHosts is issue 15's preferred leader in bully and
// ring on three namespaced hosts (wildcard binds, the shipped timings):
// n1, the lowest id but node.priority 10, leads; after its SIGKILL n3 (the
// highest id) leads; after its restart n1 takes leadership back, not before
// its preempt_delay, by a hand-over: the watch stream of the old leader
// goes from leading straight to following n1, and the other follower's
// never names no leader in between. test/e2e's
// TestPreferredNodeBullyRingProcesses is the same on loopback. Times are
// logged (docs/multihost.md), only the delay's lower bound is asserted.
func TestPreferredNodeAcrossHosts(t *testing.T) {
	for _, protocol := range []string{"ring", "bully"} {
		t.Run(protocol, func(t *testing.T) { preferredNodeAcrossHosts(t, protocol) })
	}
}

func preferredNodeAcrossHosts(t *testing.T, protocol string) {
	c := newCluster(t, 3, protocol)
	c.preemptDelay = preemptDelay.String()
	pref := c.host("n1")
	pref.priority = 10
	for _, h := range c.hosts {
		c.configure(h, h.id)
	}
	w := c.watch()
	rec := c.record(c.hosts...)
	started := time.Now()
	c.startAll()
	// At a cold start the others may elect before gossip has told them
	// n1's priority; n1 then takes over after its delay. Either way it
	// ends up leading.
	epoch, took := c.leaderIs(c.hosts, pref.name, 0, started)
	t.Logf("%s: %s (id 1, priority 10) leads epoch %d, agreed by all %v after the start", protocol, pref.name, epoch, took.Round(time.Millisecond))

	killed := time.Now()
	c.kill(pref)
	next, epoch2, took := c.leaderNotIn(c.live(), killed, pref.name)
	t.Logf("%s: SIGKILL of %s: %s leads epoch %d, agreed by both survivors %v later", protocol, pref.name, next, epoch2, took.Round(time.Millisecond))
	if next != "n3" {
		t.Fatalf("after SIGKILL of %s, %s leads; want n3, the highest id of priority 0", pref.name, next)
	}
	old, other := c.host("n3"), c.host("n2")

	// Read before the start, so that the agent's own start (from which
	// it counts its delay) is later: a slow machine only lengthens what
	// the test measures, and cannot make a correct takeover look early.
	restarted := time.Now()
	c.start(pref)
	final, took := c.leaderIs(c.hosts, pref.name, epoch2, restarted)

	isPref := func(st api.Status) bool { return st.Leader == pref.name && st.Epoch > epoch2 }
	leads := rec.waitEvent(t, pref.name, "role=leader", restarted, func(st api.Status) bool {
		return st.Role == api.RoleLeader && isPref(st)
	})
	followed := rec.waitEvent(t, old.name, "that it follows "+pref.name, restarted, isPref)
	rec.waitEvent(t, other.name, "that it follows "+pref.name, restarted, isPref)
	t.Logf("%s: restart of %s (preempt_delay %v): it published role=leader (epoch %d) %v later, %s followed it %v later, all agreed %v later",
		protocol, pref.name, preemptDelay, final, leads.at.Sub(restarted).Round(time.Millisecond),
		old.name, followed.at.Sub(restarted).Round(time.Millisecond), took.Round(time.Millisecond))
	if d := leads.at.Sub(restarted); d < preemptDelay {
		t.Errorf("%s published role=leader %v after its restart, before its preempt_delay of %v", pref.name, d, preemptDelay)
	}

	// The hand-over: from the status in which the old leader first led
	// epoch2 to the one naming n1, every status of the old leader says it
	// leads, and the next says it follows n1; every status of the other
	// follower in that span names a leader.
	handover := func(h *host) []event {
		var span []event
		in := false
		for _, e := range rec.since(h.name, killed) {
			if !in && e.st.Leader == old.name && e.st.Epoch == epoch2 {
				in = true
			}
			if in {
				span = append(span, e)
				if isPref(e.st) {
					return span
				}
			}
		}
		t.Errorf("%s: no status naming %s in epoch %d followed by one naming %s: %v", h.name, old.name, epoch2, pref.name, rec.since(h.name, killed))
		return nil
	}
	oldSpan := handover(old)
	for i, e := range oldSpan {
		last := i == len(oldSpan)-1
		if (!last && (e.st.Role != api.RoleLeader || e.st.Leader != old.name)) || (last && e.st.Role != api.RoleFollower) {
			t.Errorf("%s did not lead until it followed %s: its statuses were %v", old.name, pref.name, oldSpan)
			break
		}
	}
	otherSpan := handover(other)
	for _, e := range otherSpan {
		if e.st.Leader == "" {
			t.Errorf("%s named no leader during the hand-over: its statuses were %v", other.name, otherSpan)
			break
		}
	}
	t.Logf("%s: %s published %v; %s published %v; %s published %v since its restart",
		protocol, old.name, oldSpan, other.name, otherSpan, pref.name, lastEvents(rec.since(pref.name, restarted), 5))
	w.finish(t)
	rec.stop()
	rec.epochsNeverFall(t)
}
