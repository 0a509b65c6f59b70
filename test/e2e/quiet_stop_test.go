package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// problemLine matches a log line at WARN or ERROR level (console format:
// time, then the level).
var problemLine = regexp.MustCompile(`(?m)^\S+\t(WARN|ERROR)\t.*$`)

// TestCleanStopIsQuiet stops a healthy three-agent cluster the way an
// operator does — Ctrl-C (SIGINT) or SIGTERM in each agent's terminal, one
// after the other, the leader first — and reads every agent's log from the
// first signal on: a clean stop logs no WARN and no ERROR, and every agent
// exits 0. The agents run memberlist's LAN profile and the shipped
// timings, as config.example.toml does: a fixed one-second leave used to
// time out there whenever a single peer was left to hear it, and
// memberlist's probes still in flight used to log "use of closed network
// connection" as ERROR.
func TestCleanStopIsQuiet(t *testing.T) {
	for _, order := range []struct {
		name   string
		leader int // when the leader stops: 0 first, 2 last
		sig    syscall.Signal
	}{
		{"leader first, SIGINT", 0, syscall.SIGINT},
		{"leader last, SIGTERM", 2, syscall.SIGTERM},
	} {
		t.Run(order.name, func(t *testing.T) {
			c := newCluster(t, 3, "majority", "-gossip.profile=lan", "-election.election_timeout=200ms", "-detector.heartbeat_interval=50ms")
			c.startAll()
			a := c.waitAgreement(0)
			waitFor(t, electWait, "a healthy quorum at every agent", func() (bool, string) {
				for _, nd := range c.nodes {
					st, err := nd.status()
					if err != nil || !st.Quorum.Healthy || st.Quorum.Reachable != 3 {
						return false, fmt.Sprintf("%s: %+v, %v", nd.name, st.Quorum, err)
					}
				}
				return true, ""
			})
			var stops []*node
			for _, nd := range c.nodes {
				if nd.name != a.leader {
					stops = append(stops, nd)
				}
			}
			leader := c.byName(a.leader)
			stops = append(stops[:order.leader], append([]*node{leader}, stops[order.leader:]...)...)
			seen := map[string]int{}
			for _, nd := range c.nodes {
				seen[nd.name] = len(nd.p.log())
			}
			for _, nd := range stops {
				nd.p.signal(t, order.sig)
				if code := nd.p.wait(t, exitWait); code != 0 {
					t.Errorf("%s exited %d after %v, want 0", nd.name, code, order.sig)
				}
			}
			for _, nd := range stops {
				after := nd.p.log()[seen[nd.name]:]
				if bad := problemLine.FindAllString(after, -1); len(bad) > 0 {
					t.Errorf("%s logged during a clean stop:\n%s", nd.name, strings.Join(bad, "\n"))
				}
				if !strings.Contains(after, "INFO\tstopped") {
					t.Errorf("%s did not log that it stopped; its log since the first signal:\n%s", nd.name, after)
				}
			}
		})
	}
}
