package agent

import (
	"math"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// view is the part of the status whose change is announced to watchers.
type view struct {
	role   protocols.Role
	leader string
	epoch  uint64
}

// status computes the API status at now. Role and leader come from the
// protocol's Status at this instant, so an expired lease shows at once.
func (a *Agent) status(now protocols.Time) api.Status {
	st, origin, learned := a.electionStatus(now)
	out := api.Status{
		Node:     a.self.Name,
		ID:       uint64(a.self.ID),
		Protocol: a.cfg.Election.Protocol,
		Role:     st.Role.String(),
		Epoch:    st.Epoch,
		Members:  1,
		Seq:      a.viewSeq,

		GossipAddr:    a.gossipAddr,
		TransportAddr: a.peerAddr,
	}
	out.Leader = a.leaderName(st)
	out.Problems = a.problems()
	if st.Role == protocols.Leader && st.LeaseUntil > now {
		out.LeaseMS = st.LeaseUntil.Sub(now).Milliseconds()
		out.LeaseNS = int64(st.LeaseUntil.Sub(now))
	}
	if learned {
		out.LeaderAgeMS = now.Sub(origin).Milliseconds()
	}
	// No map here: the loop stores a status snapshot after every input.
	// Reachable means the transport heard from the member recently (a
	// message or a probe answer), not that gossip lists it: gossip kept
	// saying "3 of 3 reachable" on a cluster whose election traffic all
	// went to the wrong address.
	reached := func(m membership.Member) bool {
		return (m.State == membership.StateAlive || m.State == membership.StateSuspect) &&
			a.byID[m.ID] == m.Name && a.tr.Reachable(m.ID)
	}
	others := 0 // live members other than this agent that it reaches
	for name, m := range a.members {
		if m.State == membership.StateAlive || m.State == membership.StateSuspect {
			out.Members++
			if name != a.self.Name && reached(m) {
				others++
			}
		}
	}
	if !st.Config.IsZero() {
		// The protocol's own (replicated) voter configuration, not the
		// config file's list, which only seeds a new cluster and may
		// disagree with it.
		out.Quorum.Voters, out.Quorum.Reachable, out.Quorum.Healthy = st.Config.Quorum(func(v string) bool {
			m, ok := a.members[v]
			return v == a.self.Name || (ok && reached(m))
		})
	} else {
		out.Quorum.Voters = out.Members
		out.Quorum.Reachable = 1 + others
		out.Quorum.Healthy = out.Leader != ""
	}
	return out
}

// leaderName is the name of the leader st names, or "".
func (a *Agent) leaderName(st protocols.Status) string {
	switch {
	case st.Leader == a.self.ID:
		return a.self.Name
	case st.Leader == protocols.None:
		return ""
	case a.byID[st.Leader] != "":
		return a.byID[st.Leader]
	default:
		return st.LeaderName
	}
}

// members lists every member this agent knows, itself first, with phi.
func (a *Agent) memberList(now protocols.Time) []api.Member {
	out := []api.Member{{Name: a.self.Name, ID: uint64(a.self.ID), Addr: a.selfAddr(), State: api.StateAlive}}
	names := make([]string, 0, len(a.members))
	for name := range a.members {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := a.members[name]
		am := api.Member{Name: m.Name, ID: uint64(m.ID), Addr: m.Addr, State: m.State.String()}
		if p, ok := a.phiOf(now, m.ID); ok {
			am.Phi = math.Min(p, api.MaxPhi)
		}
		out = append(out, am)
	}
	return out
}

func (a *Agent) selfAddr() string {
	for _, m := range a.cluster.Members() {
		if m.Name == a.self.Name {
			return m.Addr
		}
	}
	return a.cfg.Gossip.Bind
}

// publish announces a change of role, leader or epoch to watchers and
// counts it. It runs after every input, so a lease that runs out is pushed
// within one tick.
//
// It runs about a hundred times a second even when nothing happens, so the
// unchanged case reads only the protocol's Status: the full api.Status
// (member counts, quorum) is built only for a change that is published.
func (a *Agent) publish() {
	now := a.now()
	ps, _, learned := a.electionStatus(now)
	v := view{role: ps.Role, leader: a.leaderName(ps), epoch: ps.Epoch}
	if v == a.lastView {
		return
	}
	a.viewSeq++
	st := a.status(now)
	prev := a.lastView
	a.lastView = v
	if v.leader != prev.leader || v.epoch != prev.epoch {
		if v.leader != "" {
			a.stats.leaderChanges++
		}
		if !learned {
			// An observer that learned the leader by gossip gets no
			// heartbeats from it: a detector would only suspect it.
			a.forgetDetectors(now, ps.Leader)
			a.watchLeader(now, ps.Leader)
		}
		a.log.Info("leadership", zap.String("leader", v.leader), zap.Uint64("epoch", v.epoch), zap.String("role", strings.ToLower(v.role.String())))
	}
	if v.role != prev.role {
		switch v.role {
		case protocols.Candidate:
			a.stats.electionsStarted++
		case protocols.Leader:
			a.stats.electionsWon++
		}
	}
	a.hub.Publish(st)
}
