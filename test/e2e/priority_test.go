package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// TestPreferredNodeBullyRingProcesses is the preferred leader (node.priority) in
// bully and ring, with three agent processes: n1, the lowest id but
// node.priority 10, leads at start; after its SIGKILL n3 leads; after its
// restart n1 takes leadership back by a planned hand-over once it has been
// up for election.preempt_delay (1 s). The old leader must keep leading
// until the hand-over: the statuses it reports go from leading straight
// to following n1, and n1 must not take over before its delay. The time to
// regain leadership and the longest gap without a leader seen by the two
// others are logged, not asserted.
func TestPreferredNodeBullyRingProcesses(t *testing.T) {
	for _, protocol := range []string{"bully", "ring"} {
		t.Run(protocol, func(t *testing.T) {
			c := newCluster(t, 3, protocol, "-election.preempt_delay=1s")
			pref := c.nodes[0]
			pref.args = append(pref.args, "-node.priority=10")
			c.startAll()
			first := c.waitLeader(0, pref.name)
			t.Logf("%s: %s (id 1, priority 10) leads in epoch %d", protocol, pref.name, first.epoch)

			pref.p.signal(t, syscall.SIGKILL)
			pref.p.wait(t, exitWait)
			other := c.waitLeader(first.epoch, highest(c.live()))
			old := c.byName(other.leader)
			c.start(0)
			restarted := time.Now()

			observers := c.nodes[1:]
			gapStart := map[string]time.Time{}
			maxGap := map[string]time.Duration{}
			// The old leader's distinct statuses, in order, up to the first
			// that names pref.
			var oldSeen []string
			lastOld := ""
			var regained time.Duration
			for regained == 0 {
				if time.Since(restarted) > electWait {
					t.Fatalf("%s did not regain leadership within %v of its restart; %s reported %v", pref.name, electWait, old.name, oldSeen)
				}
				done := true
				for _, nd := range observers {
					st, err := nd.status()
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case st.Leader == "" && gapStart[nd.name].IsZero():
						gapStart[nd.name] = time.Now()
					case st.Leader != "" && !gapStart[nd.name].IsZero():
						maxGap[nd.name] = max(maxGap[nd.name], time.Since(gapStart[nd.name]))
						gapStart[nd.name] = time.Time{}
					}
					if nd == old {
						s := fmt.Sprintf("role=%s leader=%q", st.Role, st.Leader)
						if s != lastOld && (len(oldSeen) == 0 || !strings.HasSuffix(oldSeen[len(oldSeen)-1], fmt.Sprintf("leader=%q", pref.name))) {
							oldSeen = append(oldSeen, s)
							lastOld = s
						}
					}
					if st.Leader != pref.name || st.Epoch <= other.epoch {
						done = false
					}
				}
				if done {
					regained = time.Since(restarted)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// A lower bound, safe on a slow machine: the agent started
			// after restarted was read, and counts its delay from then.
			if regained < time.Second {
				t.Errorf("%s took leadership back %v after its restart, before its preempt_delay of 1s", pref.name, regained)
			}
			// Every status the old leader reported before it named pref
			// says it led: no election without a leader came between.
			wantLead := fmt.Sprintf("role=%s leader=%q", api.RoleLeader, old.name)
			for i, s := range oldSeen {
				if i < len(oldSeen)-1 && s != wantLead {
					t.Errorf("%s did not keep leading until the hand-over: its statuses were %v", old.name, oldSeen)
					break
				}
			}
			final := c.waitLeader(other.epoch, pref.name)
			t.Logf("%s: %s (priority 10) took leadership back from %s in epoch %d, %v after its restart (preempt_delay 1s); longest gap without a leader seen by %s: %v, by %s: %v (election timeout %v); %s reported %v",
				protocol, pref.name, old.name, final.epoch, regained.Round(time.Millisecond),
				observers[0].name, maxGap[observers[0].name], observers[1].name, maxGap[observers[1].name], electionTimeout, old.name, oldSeen)
		})
	}
}
