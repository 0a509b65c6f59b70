package agent

import (
	"context"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
)

// TestObserversLearnTheLeaderByGossip: with 3 voters and 2 observers, the
// leader heartbeats only the voters; the observers learn the leader and its
// epoch by gossip — after the start and after the leader crashes — report
// how old that knowledge is, and never call themselves leader.
func TestObserversLearnTheLeaderByGossip(t *testing.T) {
	tc := newTestCluster(t, 5, "majority", "")
	for i := range tc.cfgs {
		tc.cfgs[i].Election.Voters = []string{"n1", "n2", "n3"}
		if err := tc.cfgs[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)
	observersOK := func(i int, st api.Status) bool {
		if i < 3 {
			return true
		}
		return st.Role == api.RoleObserver && st.LeaderAgeMS >= 0
	}
	tc.eventuallyStatus(t, 10*time.Second, observersOK)

	var leader int
	for i := range tc.agents {
		if tc.cfgs[i].Node.Name == first.Leader {
			leader = i
		}
	}
	tc.stop(leader, true)
	second := tc.waitAgreed(first.Epoch, 30*time.Second)
	if second.Leader == first.Leader {
		t.Fatalf("leader %s did not change after its crash", second.Leader)
	}
	tc.eventuallyStatus(t, 10*time.Second, observersOK)

	for i := 3; i < 5; i++ {
		var hb uint64
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := tc.agents[i].do(ctx, func() { hb = tc.agents[i].def().core.Stats().Received[protocols.MsgHeartbeat] })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if hb != 0 {
			t.Errorf("observer n%d received %d heartbeats: the leader still heartbeats observers", i+1, hb)
		}
	}
}
