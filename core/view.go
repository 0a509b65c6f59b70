package core

import (
	"math"
	"slices"
	"strings"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// viewKey is the part of the status whose change is announced to watchers.
type viewKey struct {
	role   protocols.Role
	leader string
	epoch  uint64
}

// Snapshot is a status computed on the loop, which can be answered at a
// later instant from any goroutine (At) without a trip through the loop:
// status is the endpoint local processes poll.
type Snapshot struct {
	Status api.Status
	// LeaseUntil is majority's lease while this node leads; 0 otherwise.
	LeaseUntil protocols.Time
	// Origin is when the leader made the claim an observer reports from
	// gossip (Learned), so that its age is computed at request time.
	Origin  protocols.Time
	Learned bool
}

// At answers the snapshot at now: a leader whose lease has run out since
// is reported as no leader at all, as the protocol itself would
// (docs/design.md §1.4), and learned knowledge has aged.
func (s Snapshot) At(now protocols.Time) api.Status {
	st := s.Status
	if s.Learned {
		st.LeaderAgeMS = now.Sub(s.Origin).Milliseconds()
	}
	if s.LeaseUntil != 0 {
		if now >= s.LeaseUntil {
			st.Role, st.Leader, st.LeaseMS, st.LeaseNS = api.RoleFollower, "", 0, 0
		} else {
			st.LeaseMS = s.LeaseUntil.Sub(now).Milliseconds()
			st.LeaseNS = int64(s.LeaseUntil.Sub(now))
		}
	}
	return st
}

// Snapshot computes the status at now with what At needs to answer it
// later.
func (n *Node) Snapshot(now protocols.Time) Snapshot {
	st, origin, learned := n.electionStatus(now)
	snap := Snapshot{Status: n.status(now, st, origin, learned), Origin: origin, Learned: learned}
	if st.Role == protocols.Leader {
		snap.LeaseUntil = st.LeaseUntil
	}
	return snap
}

// Freshen brings s, a snapshot this node took earlier, to now for what
// moves with every heartbeat: the lease and the leader's age. It costs
// the protocol's status alone, not the view's members and quorum, which
// stay as s had them. ok is false when the role, leader or epoch moved
// since s: take a full Snapshot then.
func (n *Node) Freshen(now protocols.Time, s Snapshot) (_ Snapshot, ok bool) {
	st, origin, learned := n.electionStatus(now)
	if st.Role.String() != s.Status.Role || st.Epoch != s.Status.Epoch || learned != s.Learned || n.leaderName(st) != s.Status.Leader {
		return s, false
	}
	s.Origin, s.LeaseUntil = origin, 0
	if st.Role == protocols.Leader {
		s.LeaseUntil = st.LeaseUntil
	}
	return s, true
}

// Status is the API status at now. Role and leader come from the
// protocol's Status at this instant, so an expired lease shows at once.
func (n *Node) Status(now protocols.Time) api.Status {
	st, origin, learned := n.electionStatus(now)
	return n.status(now, st, origin, learned)
}

// Leader is the leader the status names at now: its id, its name ("" when
// none) and the epoch. It is what the simulator's checker reads, so the
// checker sees exactly what the socket reports.
func (n *Node) Leader(now protocols.Time) (protocols.Status, string) {
	st, _, _ := n.electionStatus(now)
	return st, n.leaderName(st)
}

func (n *Node) status(now protocols.Time, st protocols.Status, origin protocols.Time, learned bool) api.Status {
	out := api.Status{
		Node:     n.self.Name,
		ID:       uint64(n.self.ID),
		Protocol: n.cfg.Election.Protocol,
		Role:     st.Role.String(),
		Epoch:    st.Epoch,
		Members:  1,
		Seq:      n.seq,

		GossipAddr:    n.cfg.GossipAddr,
		TransportAddr: n.cfg.TransportAddr,
	}
	out.Leader = n.leaderName(st)
	out.LeaderMeta = n.leaderMeta(out.Leader)
	out.Health = n.healthReport(st)
	out.Problems = n.problems()
	if st.Role == protocols.Leader && st.LeaseUntil > now {
		out.LeaseMS = st.LeaseUntil.Sub(now).Milliseconds()
		out.LeaseNS = int64(st.LeaseUntil.Sub(now))
	}
	if learned {
		out.LeaderAgeMS = now.Sub(origin).Milliseconds()
	}
	// others: live members other than this agent that it reaches, which
	// only bully and ring count (below). Asking the transport about every
	// member of a majority fleet on every message cost its leader more
	// than the answer was worth.
	others, everyone := 0, st.Config.IsZero()
	for name, m := range n.members {
		if isLive(m) {
			out.Members++
			if everyone && name != n.self.Name && n.reached(m) {
				others++
			}
		}
	}
	if !st.Config.IsZero() {
		// The protocol's own (replicated) voter configuration, not the
		// config file's list, which only seeds a new cluster and may
		// disagree with it; while this agent still holds that list and
		// members show a formed cluster, the formed cluster's voters.
		conf := st.Config
		if conf.Index == 0 && n.vt.formedVoters != "" && !strings.HasPrefix(n.vt.formedVoters, "#") {
			conf = protocols.Configuration{Index: versionIndex(n.vt.formedVer), Voters: n.vt.formedVoters}
		}
		out.Quorum.Voters, out.Quorum.Reachable, out.Quorum.Healthy = conf.Quorum(func(v string) bool {
			m, ok := n.members[v]
			return v == n.self.Name || (ok && n.reached(m))
		})
	} else {
		// Bully and ring: every live member is a candidate, and any one
		// of them can lead; health is having a leader.
		out.Quorum.Voters = out.Members
		out.Quorum.Reachable = 1 + others
		out.Quorum.Healthy = out.Leader != ""
	}
	return out
}

// reached reports whether m counts toward quorum health: live to gossip,
// holding its id, and heard by the transport recently. Gossip kept saying
// "3 of 3 reachable" on a cluster whose election traffic all went to the
// wrong address.
func (n *Node) reached(m membership.Member) bool {
	if !isLive(m) || n.byID[m.ID] != m.Name {
		return false
	}
	return n.cfg.Reachable == nil || n.cfg.Reachable(m.ID)
}

// leaderName is the name of the leader st names, or "".
func (n *Node) leaderName(st protocols.Status) string {
	switch {
	case st.Leader == n.self.ID:
		return n.self.Name
	case st.Leader == protocols.None:
		return ""
	case n.byID[st.Leader] != "":
		return n.byID[st.Leader]
	default:
		return st.LeaderName
	}
}

// Members lists every member this agent knows, itself first (at selfAddr),
// with phi where a detector watches it for any of the agent's elections
// (the detectors are shared: core/liveness.go).
func (n *Node) Members(now protocols.Time, selfAddr string) []api.Member {
	out := []api.Member{{Name: n.self.Name, ID: uint64(n.self.ID), Addr: selfAddr, State: api.StateAlive}}
	names := make([]string, 0, len(n.members))
	for name := range n.members {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := n.members[name]
		am := api.Member{Name: m.Name, ID: uint64(m.ID), Addr: m.Addr, State: m.State.String()}
		if p, ok := n.live.phiOf(now, m.ID); ok {
			am.Phi = math.Min(p, api.MaxPhi)
		}
		if n.byID[m.ID] == name {
			am.Heartbeats = n.heartbeatStats(m.ID)
		}
		out = append(out, am)
	}
	return out
}

// LeaderPhi is the phi of the leader as this node sees it (0 when it
// leads or knows no leader).
func (n *Node) LeaderPhi(now protocols.Time) float64 {
	st := n.proto.Status(now)
	if st.Leader == protocols.None || st.Leader == n.self.ID {
		return 0
	}
	p, _ := n.Phi(now, st.Leader)
	return p
}

// settle runs after every input: it publishes a change of role, leader or
// epoch (and reacts to it: detectors, counters), lets a leader announce
// itself to observers, and settles consistent reads. It runs after every
// input even when nothing happens, so the unchanged case reads only the
// protocol's Status: the full api.Status is built only for a change.
func (n *Node) settle(now protocols.Time) {
	n.now = now
	n.checkDigest(now)
	n.checkProbeScope()
	n.announceDue(now)
	n.checkConfirms(now)
	n.checkVoterRequests(now)
	n.checkShutdown(now)
	n.raiseFloor(now)
	ps, _, learned, floored := n.reported(now)
	v := viewKey{role: ps.Role, leader: n.leaderName(ps), epoch: ps.Epoch}
	if v == n.lastView && !n.forcePublish {
		if n.pending != nil {
			// A status not handed out yet reports the latest inputs
			// (members learned since, quorum health), not those of the
			// view change that queued it.
			st := n.Status(now)
			n.pending = &st
		}
		return
	}
	n.forcePublish = false
	n.seq++
	prev := n.lastView
	n.lastView = v
	if v.leader != prev.leader || v.epoch != prev.epoch {
		if v.leader != "" {
			n.stats.LeaderChanges++
		}
		n.noteLeaderless(now, prev.leader, v.leader)
		if !learned && !floored {
			// An observer that learned the leader by gossip gets no
			// heartbeats from it: a detector would only suspect it. A
			// floored status names no leader but says nothing of the
			// protocol's: the detectors follow the protocol's leader
			// once the floor no longer hides it.
			n.forgetDetectors(now, ps.Leader)
			n.watchLeader(now, ps.Leader)
		}
		n.log.Infow("leadership", "leader", v.leader, "epoch", v.epoch, "role", strings.ToLower(v.role.String()))
	}
	if v.role != prev.role {
		switch v.role {
		case protocols.Candidate:
			n.stats.ElectionsStarted++
		case protocols.Leader:
			n.stats.ElectionsWon++
		}
	}
	st := n.Status(now)
	n.pending = &st
	n.noteTransition(st)
}

// noteLeaderless measures how long this agent's view went without a
// leader after it lost one: from the moment its status stopped naming a
// leader to the moment it named the next (Stats.Leaderless). The start of
// an agent, which never had a leader, is not a failover.
func (n *Node) noteLeaderless(now protocols.Time, was, is string) {
	switch {
	case was != "" && is == "":
		n.leaderlessSince, n.leaderless = now, true
	case is != "" && n.leaderless:
		n.leaderless = false
		d := now.Sub(n.leaderlessSince)
		i := 0
		for i < len(LeaderlessBuckets) && d > LeaderlessBuckets[i] {
			i++
		}
		n.stats.Leaderless[i]++
		n.stats.LeaderlessSum += d
		n.stats.LeaderlessCount++
	}
}
