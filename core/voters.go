package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// Voter changes at runtime (docs/voters.md); the settings digest is in
// digest.go, a change's path from proposal to commit in voterchange.go. The
// protocol (protocols/majority) decides whether a change is safe; the
// core decides what the agent may propose, who gets the leader's
// heartbeats while a change is under way, and how members whose settings
// or voter lists disagree are treated. The agent does the I/O: the socket,
// forwarding to the leader, publishing the digest.

// Errors of voter queries and changes. The agent turns them into socket
// answers; each says what to do.
var (
	// ErrNoVoters: the protocol has no voters to change (bully, ring).
	ErrNoVoters = errors.New("voters exist only in majority")
	// ErrNoLeader: a change needs a leader to commit it.
	ErrNoLeader = errors.New("no leader: a voter change needs a leader to commit it; wait until 'agent leader' names one (a majority of the voters must be up and reachable)")
	// ErrChangeRefused wraps the reasons a change is refused before the
	// protocol sees it.
	ErrChangeRefused = errors.New("voter change refused")
	// ErrReplaced and ErrNotLeading end a wait for a commit.
	ErrReplaced   = errors.New("configuration replaced before it committed")
	ErrNotLeading = errors.New("this agent stopped leading before the configuration committed")
)

// RemovedGrace is how long a member removed from the voters keeps getting
// the leader's messages over the transport: long enough for the heartbeat
// that tells it its removal is committed, after which it is an observer
// for good and learns the leader by gossip like any other. A member being
// added gets them as long, from the moment the change is proposed.
const RemovedGrace = 10 * time.Second

// voterTrack follows the protocol's voter configuration for the
// observers' fast path, which otherwise knows only the config file's
// list, and holds the settings digest's state.
type voterTrack struct {
	conf protocols.Configuration
	// extra holds the members that get heartbeats although not voters:
	// removed ones for a grace, and ones being added; name → until when.
	extra map[string]protocols.Time

	// The settings digest: this agent's, the configuration it was made
	// from, each member's last compared (with ours) and the current
	// disagreements by member name.
	digest     string
	digestExt  string
	digestConf protocols.Configuration
	published  bool
	seen       map[string]seenDigest
	conflicts  map[string]digestConflict
	// heldDown are the members memberDown did not report down yet.
	heldDown map[protocols.ID]string
	// formedVer and formedVoters are the newest formed configuration
	// (index ≥ 1) a member showed while this agent is at its bootstrap
	// list: the quorum line counts it (view.go), since this agent's own
	// list only seeds a cluster that already exists. observerNoted: the
	// calm line for an observer that is not a voter of it was logged.
	formedVer, formedVoters string
	observerNoted           bool
	// membersSeen: every member's digest was compared since the members
	// or this node's digest last changed, so checkDigest has nothing to
	// do; without it every message cost a walk over the whole fleet.
	membersSeen bool
}

func (n *Node) voterChanger() (protocols.VoterChanger, bool) {
	vc, ok := n.proto.(protocols.VoterChanger)
	return vc, ok
}

// VoterLeader is the leader a voter change must go to, by id and name.
func (n *Node) VoterLeader(now protocols.Time) (protocols.ID, string, error) {
	if _, ok := n.voterChanger(); !ok {
		return protocols.None, "", ErrNoVoters
	}
	st, _, _ := n.electionStatus(now)
	if st.Leader == protocols.None {
		return protocols.None, "", ErrNoLeader
	}
	return st.Leader, n.leaderName(st), nil
}

// Voters is this agent's view of the voters: the committed configuration
// and a pending one.
func (n *Node) Voters(now protocols.Time) (api.Voters, error) {
	if _, ok := n.voterChanger(); !ok {
		return api.Voters{}, ErrNoVoters
	}
	st, _, _ := n.electionStatus(now)
	ps := n.proto.Status(now)
	v := api.Voters{
		Index:  ps.Committed.Index,
		Term:   ps.Committed.Term,
		Voters: ps.Committed.VoterList(),
		Leader: n.leaderName(st),
	}
	if v.Voters == nil {
		v.Voters = []string{} // never null on the wire
	}
	if ps.Config != ps.Committed && !ps.Config.IsZero() {
		v.Pending = &api.PendingVoters{Index: ps.Config.Index, Term: ps.Config.Term, Voters: ps.Config.VoterList()}
	}
	return v, nil
}

// LeaderConfigurations is, on a leader, its committed and newest voter
// configurations (for a forwarded query); leads is false elsewhere.
func (n *Node) LeaderConfigurations(now protocols.Time) (committed, newest protocols.Configuration, leads bool) {
	leader, _, err := n.VoterLeader(now)
	if err != nil || leader != n.self.ID {
		return committed, newest, false
	}
	st := n.proto.Status(now)
	return st.Committed, st.Config, true
}

// leftOutLine is the problem line of an agent whose election.voters names
// it while the cluster's configuration ver has voters (digest form) that
// leave it out: the cluster formed without it (it started later with a
// longer list), or removed it. It observes, which is safe; the line says
// which of the two ways out to take.
func (n *Node) leftOutLine(voters, ver string) string {
	return fmt.Sprintf("this agent's election.voters %s names it, but the cluster's voters are %s (configuration %s): it is an observer and will not form another cluster; to make it a voter run 'agent voters add %s' on any member, or leave it out of election.voters to run it as an observer",
		showVoters(strings.Join(n.cfg.Election.Voters, ",")), showVoters(voters), ver, n.self.Name)
}

// leftOut is leftOutLine for the configuration this agent holds, when it
// is a formed one (index ≥ 1) that leaves out an agent whose
// election.voters names it; "" otherwise.
func (n *Node) leftOut() string {
	conf := n.proto.Status(n.now).Config
	if conf.Index == 0 || conf.Has(n.self.Name) || !slices.Contains(n.cfg.Election.Voters, n.self.Name) {
		return ""
	}
	return n.leftOutLine(conf.Voters, fmt.Sprintf("%d.%d", conf.Term, conf.Index))
}

// problems is the status's problems list: the members whose settings
// digest disagrees with this agent's now, then the configuration
// conflicts the protocol met.
func (n *Node) problems() api.Problems {
	var lines []string
	if len(n.vt.conflicts) > 0 {
		names := make([]string, 0, len(n.vt.conflicts))
		for name := range n.vt.conflicts {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c := n.vt.conflicts[name]
			for _, l := range []string{c.line, c.ext} {
				if l != "" && !slices.Contains(lines, l) {
					lines = append(lines, l)
				}
			}
		}
	}
	if vc, ok := n.voterChanger(); ok {
		if l := n.leftOut(); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
		lines = append(lines, vc.Problems()...)
	}
	if len(lines) == 0 {
		return ""
	}
	return api.NewProblems(lines)
}

// memberDown tells the protocol that member id (name) is dead or gone,
// except while this node is at its bootstrap configuration and that member
// showed another bootstrap list or a formed cluster: the protocol's
// bootstrap lets a candidate win once every member gossip still reports
// alive answered, so a member that disagreed would, once down, let this
// node form a second cluster with its own list (n1 with ["n1"]
// partitioned from n2 and n3). Held back, it keeps the bootstrap waiting;
// the protocol hears of it when this node adopts a formed configuration
// (releaseHeldDown).
func (n *Node) memberDown(now protocols.Time, id protocols.ID, name string) {
	if c, ok := n.vt.conflicts[name]; ok && c.bootstrap && versionIndex(splitVersion(n.vt.digest)) == 0 {
		if n.vt.heldDown == nil {
			n.vt.heldDown = make(map[protocols.ID]string)
		}
		if _, held := n.vt.heldDown[id]; !held {
			n.log.Infow("not counting a member out of the bootstrap: it disagreed on the voters", "member", name)
		}
		n.vt.heldDown[id] = name
		return
	}
	n.proto.MemberDown(now, id)
}

// releaseHeldDown tells the protocol of the members memberDown held back,
// once this node has left its bootstrap configuration, for those still
// down.
func (n *Node) releaseHeldDown(now protocols.Time) {
	ids := make([]protocols.ID, 0, len(n.vt.heldDown))
	for id := range n.vt.heldDown {
		ids = append(ids, id)
	}
	slices.Sort(ids) // id order, for exact replays
	for _, id := range ids {
		name := n.vt.heldDown[id]
		delete(n.vt.heldDown, id)
		m, ok := n.members[name]
		if !ok || m.ID != id || n.byID[id] != name || m.State == membership.StateDead || m.State == membership.StateLeft {
			n.proto.MemberDown(now, id)
		}
	}
}

// heartbeatExtra lets name have the leader's messages over the transport
// until until, voter or not.
func (n *Node) heartbeatExtra(name string, until protocols.Time) {
	if n.vt.extra == nil {
		n.vt.extra = make(map[string]protocols.Time)
	}
	n.vt.extra[name] = until
}

// currentVoter reports whether name is a voter of the protocol's newest or
// committed configuration, is being added, or was removed from it less
// than RemovedGrace ago.
func (n *Node) currentVoter(now protocols.Time, name string) bool {
	if _, ok := n.voterChanger(); !ok {
		return false
	}
	st := n.proto.Status(now)
	t := &n.vt
	if st.Config != t.conf {
		for v, until := range t.extra {
			if now >= until {
				delete(t.extra, v) // bounded by the members removed within the grace
			}
		}
		for _, v := range t.conf.VoterList() {
			if !st.Config.Has(v) {
				n.heartbeatExtra(v, now.Add(RemovedGrace))
			}
		}
		t.conf = st.Config
	}
	if st.Config.Has(name) || st.Committed.Has(name) {
		return true
	}
	until, ok := t.extra[name]
	if ok && now >= until {
		delete(t.extra, name)
		return false
	}
	return ok
}
