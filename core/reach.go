package core

import (
	"slices"

	"github.com/conclave-agent/conclave/protocols"
)

// tellReach hands a protocol that reads the transport's view
// (protocols.ReachSetter: bully) the live members the transport does not
// reach, changes only, in id order so that the simulator replays a seed
// exactly. It runs before every Tick, and only while the protocol knows
// no leader: bully reads it only then (a follower waiting for a leader
// waits for no member below it that the transport fails to reach), and
// asking the transport about every member on every heartbeat tick of a
// large cluster would cost for nothing.
//
// The detectors cannot say it: one watches only a member that heartbeats
// this node, or a leader it learned, so a seed killed before the first
// election stayed live, unsuspected, until gossip declared it dead.
func (n *Node) tellReach(now protocols.Time) {
	rs, ok := n.proto.(protocols.ReachSetter)
	if !ok || n.cfg.Reachable == nil || n.proto.Status(now).Leader != protocols.None {
		return
	}
	var changed []protocols.ID // almost always empty: no allocation
	for name, m := range n.members {
		if name == n.self.Name || !isLive(m) || n.byID[m.ID] != name {
			continue
		}
		if un := !n.cfg.Reachable(m.ID); un != n.unreached[m.ID] {
			changed = append(changed, m.ID)
		}
	}
	if len(n.unreached) > 0 {
		// A member no longer live is forgotten: down, it is not waited
		// for anyway, and back it is asked afresh.
		for id := range n.unreached {
			name := n.byID[id]
			if m, ok := n.members[name]; !ok || !isLive(m) || m.ID != id {
				changed = append(changed, id)
			}
		}
	}
	if len(changed) == 0 {
		return
	}
	slices.Sort(changed)
	changed = slices.Compact(changed)
	for _, id := range changed {
		name := n.byID[id]
		m, ok := n.members[name]
		un := ok && m.ID == id && isLive(m) && name != n.self.Name && !n.cfg.Reachable(id)
		if un {
			if n.unreached == nil {
				n.unreached = make(map[protocols.ID]bool)
			}
			n.unreached[id] = true
			n.log.Debugw("member not reached by the transport", "member", name)
		} else {
			delete(n.unreached, id)
		}
		rs.SetUnreached(now, id, un)
	}
}
