package core

import "github.com/conclave-agent/conclave/api"

// Transition names, as in [[hook]] on = … (docs/health.md).
const (
	OnLeader   = "leader"
	OnFollower = "follower"
	OnNoLeader = "no_leader"
)

// Transition is a change of this agent's view of leadership that fires
// its hooks: the shell runs the hooks configured for On. The core decides
// when one happened, so a repeated view (the same leader, epoch and role
// published again, say for a new health report) fires nothing.
type Transition struct {
	// On is OnLeader (this node leads), OnFollower (another node leads)
	// or OnNoLeader.
	On string
	// Epoch and Leader name the leadership ("" when none); Role is this
	// node's role as the API names it.
	Epoch  uint64
	Leader string
	Role   string
}

// transitionOf is the hooks' view of a published status.
func transitionOf(st api.Status) Transition {
	t := Transition{Epoch: st.Epoch, Leader: st.Leader, Role: st.Role}
	switch {
	case st.Role == api.RoleLeader:
		t.On = OnLeader
	case st.Leader != "":
		t.On = OnFollower
	default:
		t.On = OnNoLeader
	}
	return t
}

// noteTransition queues the hooks' transition for a status about to be
// published, unless the hooks already fired (or are about to fire) for
// the same one.
func (n *Node) noteTransition(st api.Status) {
	t := transitionOf(st)
	last := n.hooked
	if n.hook != nil {
		last = *n.hook
	}
	if t == last || t.On == OnNoLeader && last.On == OnNoLeader {
		// With no leader, a new role or epoch (a candidate's next term)
		// is no news to a hook: it fires once per loss of leadership.
		return
	}
	n.hook = &t
}
