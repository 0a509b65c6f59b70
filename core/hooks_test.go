package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// TestHooksFireOncePerTransition: a never-run sole voter wins at once and
// fires leader once; a status published again for a new health report,
// with the same leader, epoch and role, fires nothing more.
func TestHooksFireOncePerTransition(t *testing.T) {
	tn := policyNode(t, ProtocolSpec{Protocol: ProtocolMajority, Voters: []string{"self"}}, false, Unsafe{})
	for range 10 {
		tn.at(time.Second)
	}
	if len(tn.hooks) != 1 || tn.hooks[0].On != OnLeader || tn.hooks[0].Leader != "self" || tn.hooks[0].Epoch == 0 {
		t.Fatalf("hooks fired for %+v; want leader (self) once", tn.hooks)
	}
	tn.SetHealth(tn.now, Health{Report: &api.HealthReport{Status: api.HealthPassing}})
	tn.drain()
	if len(tn.hooks) != 1 {
		t.Fatalf("a republished status with the same leadership fired %+v", tn.hooks[1:])
	}
}

// TestTransitionOf: the hooks' view of a status.
func TestTransitionOf(t *testing.T) {
	for _, tc := range []struct {
		st api.Status
		on string
	}{
		{api.Status{Role: api.RoleLeader, Leader: "n1", Epoch: 3}, OnLeader},
		{api.Status{Role: api.RoleFollower, Leader: "n2", Epoch: 3}, OnFollower},
		{api.Status{Role: api.RoleFollower}, OnNoLeader},
	} {
		if got := transitionOf(tc.st); got.On != tc.on || got.Epoch != tc.st.Epoch || got.Leader != tc.st.Leader || got.Role != tc.st.Role {
			t.Errorf("status %+v: transition %+v, want on %s", tc.st, got, tc.on)
		}
	}
}
