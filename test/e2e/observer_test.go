package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// TestObserverEpochSurvivesRestart: an observer learns the leader's epoch
// E by gossip only (majority heartbeats voters alone), then, with every
// voter stopped so that no announcement can arrive, is SIGKILLed and
// restarted: no /v1/status answer of the restarted agent reports an epoch
// below E (docs/design.md §1.2; docs/simulator.md finding 3). Before the
// observed epoch was persisted it reported its protocol's own epoch, 0.
func TestObserverEpochSurvivesRestart(t *testing.T) {
	c := newCluster(t, 4, "majority", "-election.voters=n1,n2,n3")
	c.startAll()
	first := c.waitAgreement(0)
	// A failover, so that the epoch the observer learns is one only
	// gossip told it: n4 was a member before this leader was elected, so
	// the leader never mistook it for a voter and heartbeated it.
	c.byName(first.leader).p.kill(t)
	a := c.waitAgreement(first.epoch)
	obs := c.byName("n4")
	st, err := obs.status()
	if err != nil || st.Role != api.RoleObserver || st.Epoch != a.epoch {
		t.Fatalf("n4 before the restart: %+v, %v; want an observer in epoch %d", st, err, a.epoch)
	}
	t.Logf("n4 observes %s in epoch %d (leader_age_ms %d)", st.Leader, st.Epoch, st.LeaderAgeMS)

	for _, nd := range c.nodes[:3] {
		if nd.p != nil {
			nd.p.kill(t)
		}
	}
	obs.p.kill(t)
	c.start(3)
	var answers int
	waitFor(t, electWait, "the restarted observer answering /v1/status", func() (bool, string) {
		st, err := obs.status()
		if err != nil {
			return false, err.Error()
		}
		answers++
		if st.Epoch < a.epoch {
			t.Fatalf("restarted observer reports epoch %d (leader %q), below the %d it reported before", st.Epoch, st.Leader, a.epoch)
		}
		return true, ""
	})
	// Keep asking for a while: no answer may go back, and with every voter
	// down none may name a leader.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		st, err := obs.status()
		if err != nil {
			t.Fatalf("restarted observer: %v", err)
		}
		answers++
		if st.Epoch < a.epoch || st.Leader != "" {
			t.Fatalf("restarted observer reports %s", describe(st))
		}
	}
	t.Logf("%d answers of the restarted observer, none below epoch %d", answers, a.epoch)
}

func describe(st api.Status) string {
	return fmt.Sprintf("role=%s leader=%q epoch=%d leader_age_ms=%d", st.Role, st.Leader, st.Epoch, st.LeaderAgeMS)
}
