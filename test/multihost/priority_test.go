package multihost

import (
	"fmt"
	"io"
	"os"
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
		sts, desc, ok := statuses(hs)
		if !ok {
			return false, desc
		}
		epoch = sts[0].Epoch
		for _, st := range sts {
			if st.Leader != name || st.Epoch != epoch || st.Epoch <= minEpoch || (st.Node == name && st.Role != api.RoleLeader) {
				return false, desc
			}
		}
		return true, desc
	})
	return epoch, time.Since(since)
}

// waitMembers waits until every host in hs counts n live members.
func waitMembers(t testing.TB, hs []*host, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("every host to count %d members", n), func() (bool, string) {
		var desc strings.Builder
		ok := true
		for _, h := range hs {
			st, err := h.status()
			if err != nil {
				return false, err.Error()
			}
			fmt.Fprintf(&desc, "%s: members=%d; ", h.name, st.Members)
			ok = ok && st.Members == n
		}
		return ok, desc.String()
	})
}

// TestPreferredNodeAcrossHosts is the preferred leader (node.priority) in bully and
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
	// Each host must know the other two before n1, the gossip seed, is
	// killed: a survivor that learned of the other only through n1 may
	// not have yet (docs/multihost.md, "A seed killed while the cluster
	// forms").
	waitMembers(t, c.hosts, len(c.hosts))

	// An agent that gets no CPU for longer than the election timeout (a
	// loaded machine: CI runs this beside every other package's race
	// tests) is suspected, and the election that follows is not a
	// hand-over: the preferred node wins it whether or not its delay is
	// over. A round in which a survivor suspected or lost another is
	// therefore run again, up to three times.
	const tries = 3
	for try := 1; ; try++ {
		disturbed := preferredRound(t, c, rec, protocol, epoch)
		if disturbed == "" {
			break
		}
		t.Logf("%s: round %d disturbed, not a hand-over: %s", protocol, try, disturbed)
		if try == tries {
			w.finish(t)
			rec.stop()
			rec.epochsNeverFall(t)
			t.Skipf("%s: all %d rounds were disturbed by survivors suspecting each other (the machine is too loaded for this test); the hand-over was not checked", protocol, tries)
		}
		epoch, _ = c.leaderIs(c.hosts, pref.name, 0, time.Now())
	}
	w.finish(t)
	rec.stop()
	rec.epochsNeverFall(t)
}

// preferredRound kills the preferred node (n1, leading epoch), waits for n3
// to lead, restarts n1 and waits for it to lead again. When a survivor
// logged that it suspected or lost the other survivor meanwhile, it returns
// those lines and asserts nothing about the hand-over; otherwise it checks
// it.
func preferredRound(t *testing.T, c *cluster, rec *recorder, protocol string, epoch uint64) string {
	pref, old, other := c.host("n1"), c.host("n3"), c.host("n2")
	killed := time.Now()
	c.kill(pref)
	// n3 ranks highest among the survivors (priority 0, highest id);
	// should a stalled n3 let n2 win first, n3 takes over from it.
	epoch2, took := c.leaderIs(c.live(), old.name, epoch, killed)
	t.Logf("%s: SIGKILL of %s: %s leads epoch %d, agreed by both survivors %v later", protocol, pref.name, old.name, epoch2, took.Round(time.Millisecond))

	logFrom := map[string]int64{}
	for _, h := range []*host{old, other} {
		if fi, err := os.Stat(h.logPath); err == nil {
			logFrom[h.name] = fi.Size()
		}
	}
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
	if d := suspicions(t, []*host{old, other}, logFrom); d != "" {
		return d
	}

	if d := leads.at.Sub(restarted); d < preemptDelay {
		t.Errorf("%s published role=leader %v after its restart, before its preempt_delay of %v", pref.name, d, preemptDelay)
	}
	// The hand-over: from the last status a survivor published before the
	// restart to the first naming n1, every status of the old leader says
	// it leads and the next says it follows n1; every status of the other
	// follower names a leader.
	span := func(h *host) []event {
		var out []event
		for _, e := range rec.events(h.name) {
			if e.at.Before(restarted) {
				out = append(out[:0], e)
				continue
			}
			out = append(out, e)
			if isPref(e.st) {
				return out
			}
		}
		t.Errorf("%s published no status naming %s after its restart: %v", h.name, pref.name, out)
		return nil
	}
	oldSpan := span(old)
	for i, e := range oldSpan {
		last := i == len(oldSpan)-1
		if (!last && (e.st.Role != api.RoleLeader || e.st.Leader != old.name)) || (last && e.st.Role != api.RoleFollower) {
			t.Errorf("%s did not lead until it followed %s: its statuses were %v", old.name, pref.name, oldSpan)
			break
		}
	}
	otherSpan := span(other)
	for _, e := range otherSpan {
		if e.st.Leader == "" {
			t.Errorf("%s named no leader during the hand-over: its statuses were %v", other.name, otherSpan)
			break
		}
	}
	t.Logf("%s: %s published %v; %s published %v; %s published %v since its restart",
		protocol, old.name, oldSpan, other.name, otherSpan, pref.name, lastEvents(rec.since(pref.name, restarted), 5))
	return ""
}

// suspicions returns the lines the hosts hs logged after the given
// offsets of their logs in which one of them suspected, or saw go down,
// another of hs.
func suspicions(t *testing.T, hs []*host, from map[string]int64) string {
	t.Helper()
	var out []string
	for _, h := range hs {
		f, err := os.Open(h.logPath)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(io.NewSectionReader(f, from[h.name], 1<<30))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "\tmember suspected\t") && !strings.Contains(line, "\tmember down\t") {
				continue
			}
			for _, o := range hs {
				if o != h && strings.Contains(line, fmt.Sprintf("%q: %q", "member", o.name)) {
					out = append(out, h.name+": "+line)
				}
			}
		}
	}
	return strings.Join(out, "; ")
}
