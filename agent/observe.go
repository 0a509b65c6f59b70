package agent

import (
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// observers is the agent's side of the observers' slow path
// (protocols/observe): with majority and a cluster that gossips, the
// leader heartbeats only voters and announces itself by gossip; observers
// report what the announcements say. Without gossip (the in-memory
// cluster of tests) every member keeps getting heartbeats.
type observers struct {
	gossip    membership.Gossiper // nil: the path is off
	voters    map[string]bool
	knowledge observe.Knowledge
	announcer *observe.Announcer
}

func (a *Agent) initObservers() {
	g, ok := a.cluster.(membership.Gossiper)
	if !ok || a.cfg.Election.Protocol != config.ProtocolMajority {
		return
	}
	a.obs.gossip = g
	a.obs.voters = make(map[string]bool, len(a.cfg.Election.Voters))
	for _, v := range a.cfg.Election.Voters {
		a.obs.voters[v] = true
	}
	a.obs.announcer = observe.NewAnnouncer(a.self.ID, observe.RefreshInterval)
}

// gossiped is the channel announcements arrive on; nil (never ready)
// while the path is off.
func (a *Agent) gossiped() <-chan []byte {
	if a.obs.gossip == nil {
		return nil
	}
	return a.obs.gossip.Gossiped()
}

// fastPath reports whether m goes over the transport (observe.FastPath).
func (a *Agent) fastPath(m protocols.Message) bool {
	if a.obs.gossip == nil {
		return true
	}
	name, known := a.byID[m.To]
	return observe.FastPath(m, !known || a.obs.voters[name] || a.currentVoter(name))
}

// learn takes a gossiped message: a newer announcement is kept and relayed.
func (a *Agent) learn(b []byte) {
	ann, err := observe.Decode(b)
	if err != nil {
		a.log.Debug("ignoring gossiped message", zap.Error(err))
		return
	}
	if ann.Leader == a.self.ID {
		return // our own, relayed back
	}
	if a.obs.knowledge.Learn(a.now(), ann) {
		a.relay()
	}
}

// relay gossips the current knowledge; each transmission carries its age
// at the moment it leaves.
func (a *Agent) relay() {
	cur, ok := a.obs.knowledge.Current(a.now())
	if !ok {
		return
	}
	held := time.Now()
	a.obs.gossip.Gossip(func() []byte {
		c := cur
		c.Age += time.Since(held)
		return c.Append(nil)
	})
}

// announce gossips this leader's announcement when one is due and some
// member observes (a cluster of voters only needs none).
func (a *Agent) announce(now protocols.Time) {
	if a.obs.announcer == nil {
		return
	}
	a.obs.announcer.Observe(now, a.proto.Status(now))
	ann, ok := a.obs.announcer.Due(now)
	if !ok || !a.hasObservers() {
		// Due re-armed the timer either way, so the loop does not spin.
		return
	}
	held := time.Now()
	a.obs.gossip.Gossip(func() []byte {
		c := ann
		c.Age = time.Since(held)
		return c.Append(nil)
	})
}

// announceDeadline is when the next announcement is due, for nextWake.
func (a *Agent) announceDeadline() (protocols.Time, bool) {
	if a.obs.announcer == nil {
		return 0, false
	}
	return a.obs.announcer.NextDeadline()
}

func (a *Agent) hasObservers() bool {
	for name, m := range a.members {
		if !a.obs.voters[name] && (m.State == membership.StateAlive || m.State == membership.StateSuspect) {
			return true
		}
	}
	return false
}

// electionStatus is the protocol's status, with an observer's leader, epoch
// and term taken from the newest announcement when that is newer than
// what the protocol knows. It returns when the leader made that claim.
func (a *Agent) electionStatus(now protocols.Time) (protocols.Status, protocols.Time, bool) {
	st := a.proto.Status(now)
	if a.obs.gossip == nil || st.Role != protocols.Observer {
		return st, 0, false
	}
	cur, ok := a.obs.knowledge.Current(now)
	if !ok || cur.Epoch < st.Epoch {
		return st, 0, false
	}
	st.Leader, st.Epoch, st.Term, st.LeaderName = cur.Leader, cur.Epoch, cur.Term, ""
	origin, _ := a.obs.knowledge.Origin()
	return st, origin, true
}
