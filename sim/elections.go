package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// Multi-election runs (Options.Elections; docs/simulator.md, "Several
// elections per node"): every node of a core-mode run runs named
// elections beside the default one, one core.Node each, over the one
// membership model, network and transport peer table, routed as
// agent/agent.go routes them: every membership event and every wake-up
// to every election, a delivered message to the election its
// Message.Election names ("" the default one), a gossiped announcement to
// the election core.ElectionOf reads in it, one Drain per election per
// input, the default election first. Each election persists its own
// HardState and observed epoch, as the agent keeps each in its own store,
// and the checker judges each election on its own.

// ElectionSpec declares a named election every node runs beside the
// default one.
type ElectionSpec struct {
	// Name is the election's name: not "" nor core.DefaultElection.
	Name string
	// Core builds the election's core configuration for one node, with
	// core.Config.Name set to Name. Its Session policy turns the session
	// nemesis (FaultSession) and the session checks on for the election.
	Core CoreFactory
	// Group: the election shares fate with the default election, its
	// group's anchor (config election.group): a node stands in it only
	// while it leads the default election, and liveness requires both to
	// be led by one node.
	Group bool
	// Checks are the election's invariants. Read are
	// SingleLeaderPerEpoch, AgreeOnLeaderOfEpoch, EpochMonotonic, Fencing,
	// Lease, VoteOncePerTerm and Isolation, and LivenessBound, which only
	// turns the election's liveness check on: every election must be live
	// by the run's deadline, Options.Checks.LivenessBound after the heal.
	Checks Checks
}

// ShellBugs plants deliberate bugs in the simulator's shell, the part
// that stands for the agent's routing and stores, to show that the
// checker catches a shell that mixes elections up. Simulator tests only.
type ShellBugs struct {
	// OneRecord persists every election's HardState and observed epoch
	// into one record per node, and starts every election from it.
	OneRecord bool
	// RouteToDefault hands every message and gossiped announcement to
	// the default election, whichever election it names.
	RouteToDefault bool
	// WakeForDefault sleeps until the default election's next deadline
	// only, as if the agent's loop asked the default core alone.
	WakeForDefault bool
	// NoGroupLead never tells a group's follower elections whether the
	// node leads the anchor (core.Node.SetGroupLead); GroupLeadAlways
	// tells them it does, so each stands on its own.
	NoGroupLead, GroupLeadAlways bool
	// NoRejoin never runs the agent's rejoin glue (core.RejoinCheck):
	// a node joins gossip only at its start.
	NoRejoin bool
}

// InvSession: a node became leader of a session election while it held
// no session.
const InvSession = "session-leader"

// InvIsolation: a crash or pause of one node moved the leadership of an
// election that node did not lead, while the rest of the network was
// intact (Checks.Isolation).
const InvIsolation = "isolation"

// evSessionKeep is a node's session holders checking in (arg: election).
const evSessionKeep = evFailover + 1

// elNode is one named election's state on one node.
type elNode struct {
	c *core.Node
	// hs and observed are the election's durable state, kept across
	// crashes, apart from every other election's.
	hs       protocols.HardState
	observed uint64
	// want is the members this election asked the transport to hold a
	// peer for (core.PeerChange): a peer is removed once no election
	// wants it, as agent.memberOfAny decides.
	want map[protocols.ID]bool

	// Checker state, as node's for the default election.
	st        protocols.Status
	maxEpoch  uint64
	lastKey   statusKey
	lastValid bool
	// leading is the epoch the node last published leading (0: never).
	leading uint64
	// campaign is the last term the node persisted a vote for itself in
	// (a majority campaign), and campaignHeld whether it held a session
	// then.
	campaign     uint64
	campaignHeld bool

	// held is the sessions local processes hold on the election here;
	// keeping says a check-in chain is queued, keepGen numbers chains.
	held    []heldSession
	keeping bool
	keepGen uint32
}

// heldSession is one local process's session: it checks in until until
// (virtual time), then closes it (close) or falls silent, and its session
// expires after the TTL.
type heldSession struct {
	id     uint64
	until  time.Duration
	close  bool
	silent bool
}

// elRun is one named election's run-wide state: its checker's.
type elRun struct {
	spec     ElectionSpec
	leaderOf map[uint64]claim
	votes    map[voteKey]protocols.ID
	fence    fence
	curLead  int
	live     bool
	// session and voters are the election's, from the first core
	// configuration built (voters empty: every member may lead).
	session core.SessionPolicy
	voters  []string
	known   bool
	// holder is the node given the only session at the heal, which
	// liveness requires to lead; -1 when none is owed one.
	holder int
}

// fence is a fenced resource: the highest epoch it accepted, and from
// whom.
type fence struct {
	set  bool
	high uint64
	node int
}

func validateElections(o Options) error {
	if len(o.Elections) == 0 {
		return nil
	}
	if o.Core == nil {
		return errors.New("sim: Options.Elections needs core mode (Options.Core)")
	}
	if o.Checks.FailoverBound > 0 || o.Checks.Settle > 0 {
		return errors.New("sim: Options.Elections runs without the failover probe and the settle quiet: set Checks.FailoverBound and Checks.Settle to zero")
	}
	var names []string
	for _, e := range o.Elections {
		switch {
		case e.Name == "" || e.Name == core.DefaultElection:
			return fmt.Errorf("sim: election name %q is the default election's", e.Name)
		case slices.Contains(names, e.Name):
			return fmt.Errorf("sim: election %q declared twice", e.Name)
		case e.Core == nil:
			return fmt.Errorf("sim: election %q has no Core factory", e.Name)
		}
		names = append(names, e.Name)
	}
	return nil
}

func (r *run) initElections() {
	for _, spec := range r.o.Elections {
		r.el = append(r.el, &elRun{
			spec: spec, leaderOf: make(map[uint64]claim), votes: make(map[voteKey]protocols.ID),
			curLead: -1, holder: -1,
		})
	}
}

// reachFunc is core.Config.Reachable for node idx: the network model's
// answer.
func (r *run) reachFunc(idx int) func(protocols.ID) bool {
	return func(id protocols.ID) bool {
		j := int(id) - 1
		if j < 0 || j >= len(r.nodes) {
			return false
		}
		p := r.nodes[j]
		// The member's transport admits only members it lists.
		return !p.crashed && !p.paused && r.conn[j][idx] && r.cm.knows[j][idx]
	}
}

// startElections builds n's named elections' cores from their persisted
// state, after the default one's.
func (r *run) startElections(n *node) error {
	cn := n.cn
	cn.defWant = make(map[protocols.ID]bool)
	for i, er := range r.el {
		e := cn.els[i]
		hs, observed := e.hs, e.observed
		if r.o.ShellBugs.OneRecord {
			hs, observed = n.hs, cn.observed
		}
		cfg, err := er.spec.Core(NodeConfig{
			Self:              n.member,
			Voters:            r.voters,
			Members:           append([]protocols.Member(nil), r.mems...),
			HardState:         hs,
			Now:               r.local(n),
			Candidacy:         r.candidacy(n.idx),
			Rand:              core.NewRand(r.rng.Uint64(), r.rng.Uint64()),
			ElectionTimeout:   r.o.ElectionTimeout,
			HeartbeatInterval: r.o.HeartbeatInterval,
			MaxClockDrift:     r.o.MaxClockDrift,
		})
		if err != nil {
			return fmt.Errorf("sim: election %s's core factory for n%d: %w", er.spec.Name, n.idx+1, err)
		}
		if cfg.Name != er.spec.Name {
			return fmt.Errorf("sim: election %s's core factory built election %q", er.spec.Name, cfg.Name)
		}
		if r.o.Trace != nil && cfg.Logger == nil {
			cfg.Logger = traceLogger{r: r, idx: n.idx, el: er.spec.Name}
		}
		cfg.Reachable = r.reachFunc(n.idx)
		cfg.ObservedEpoch = observed
		cfg.Liveness = cn.live
		c, err := core.New(cfg)
		if err != nil {
			return fmt.Errorf("sim: election %s's core for n%d: %w", er.spec.Name, n.idx+1, err)
		}
		if !er.known {
			er.known = true
			er.session = cfg.Session
			er.voters = slices.Clone(cfg.Election.Voters)
		}
		e.c, e.lastValid = c, false
		e.want = make(map[protocols.ID]bool)
		e.held, e.keeping = nil, false
		e.keepGen++
	}
	return nil
}

// stopElections drops n's named elections' cores at a crash: their
// sessions die with the process.
func stopElections(n *node) {
	for _, e := range n.cn.els {
		e.c, e.lastValid = nil, false
		e.held, e.keeping = nil, false
		e.keepGen++
	}
}

// drainElections carries out the named elections' Ready batches after
// the default one's, as the agent's handleReady does. It reports false
// when the run stopped on a driver violation.
func (r *run) drainElections(n *node) bool {
	for i, e := range n.cn.els {
		if e.c == nil {
			continue
		}
		if r.el[i].spec.Group && !r.o.ShellBugs.NoGroupLead {
			// As the agent's followGroups: after every input, before
			// the Ready (core/group.go).
			now := r.local(n)
			e.c.SetGroupLead(now, n.cn.c.Leads(now) || r.o.ShellBugs.GroupLeadAlways)
		}
		if err := core.Drain(e.c, elShell{r, n, i}); err != nil {
			r.violate(InvDriver, "n%d election %s: %v", n.idx+1, r.el[i].spec.Name, err)
			return false
		}
	}
	return true
}

// stopDone reports whether every election's core on n finished its
// shutdown hand-over.
func stopDone(n *node) bool {
	if _, done := n.cn.c.Stopping(); !done {
		return false
	}
	for _, e := range n.cn.els {
		if _, done := e.c.Stopping(); !done {
			return false
		}
	}
	return true
}

// nextWake is when n's loop wakes, as the agent's nextWake computes it:
// the default election's next deadline alone, or with named elections
// the wake-up the core's timer slack picks to serve several at once
// (core.CoalescedWake); false when one has no deadline.
// ShellBugs.WakeForDefault asks the default election alone.
func nextWake(n *node, now protocols.Time, slack time.Duration, wakeForDefault bool) (protocols.Time, bool) {
	next, ok := n.cn.c.NextWake(now, coreMaxSleep)
	if !ok || len(n.cn.els) == 0 || wakeForDefault {
		return next, ok
	}
	wakes := append(n.cn.wakes[:0], next)
	for _, e := range n.cn.els {
		t, ok := e.c.NextWake(now, coreMaxSleep)
		if !ok {
			return 0, false
		}
		wakes = append(wakes, t)
	}
	n.cn.wakes = wakes
	return core.CoalescedWake(wakes, slack), true
}

// stepTarget returns the core a message delivered to n goes to: the
// election it names; nil when n runs none by that name.
func (r *run) stepTarget(n *node, m protocols.Message) *core.Node {
	if m.Election == "" || r.o.ShellBugs.RouteToDefault {
		return n.cn.c
	}
	return r.electionCore(n, m.Election)
}

// gossipTarget returns the core a gossiped payload goes to (core.
// ElectionOf); nil for none.
func (r *run) gossipTarget(n *node, b []byte) *core.Node {
	if len(n.cn.els) == 0 || r.o.ShellBugs.RouteToDefault {
		return n.cn.c
	}
	name, ok := core.ElectionOf(b)
	if !ok {
		return nil
	}
	return r.electionCore(n, name)
}

func (r *run) electionCore(n *node, name string) *core.Node {
	if name == core.DefaultElection {
		return n.cn.c
	}
	for i, er := range r.el {
		if er.spec.Name == name {
			return n.cn.els[i].c
		}
	}
	return nil
}

// peerWanted reports whether any election on cn still wants a transport
// peer for id.
func peerWanted(cn *coreNode, id protocols.ID) bool {
	if cn.defWant[id] {
		return true
	}
	for _, e := range cn.els {
		if e.want[id] {
			return true
		}
	}
	return false
}

// applyPeers applies one election's peer changes to n's shared peer
// table; want is that election's own set.
func (r *run) applyPeers(n *node, want map[protocols.ID]bool, label string, peers []core.PeerChange) {
	cn := n.cn
	for _, p := range peers {
		if p.Remove {
			delete(want, p.ID)
			if !peerWanted(cn, p.ID) {
				delete(cn.peers, p.ID)
			}
		} else {
			want[p.ID] = true
			cn.peers[p.ID] = p.PeerID
		}
		r.rec(traceRec{kind: recInput, node: int32(n.idx), a: inputPeer, b: uint64(p.ID), c: boolBit(p.Remove), el: label})
	}
}

// elShell is the simulator as core.Drain's shell for named election i on
// node n.
type elShell struct {
	r *run
	n *node
	i int
}

func (s elShell) el() (*elNode, *elRun) { return s.n.cn.els[s.i], s.r.el[s.i] }

// Persist keeps the election's own record (ShellBugs.OneRecord: the
// node's one record).
func (s elShell) Persist(hs *protocols.HardState, observed uint64) error {
	r, n := s.r, s.n
	e, er := s.el()
	if hs != nil {
		if r.o.ShellBugs.OneRecord {
			n.hs = *hs
		} else {
			e.hs = *hs
		}
		if hs.Vote == n.member.ID && hs.Term > e.campaign {
			e.campaign, e.campaignHeld = hs.Term, e.c.Sessions() > 0
		}
		r.lastPersist = n.idx
		if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextPersist {
			r.crashNext = n.idx
		}
		r.rec(traceRec{kind: recPersist, node: int32(n.idx), a: hs.Term, b: uint64(hs.Vote), c: hs.Epoch, el: er.spec.Name})
	}
	if observed != 0 {
		if r.o.ShellBugs.OneRecord {
			n.cn.observed = observed
		} else {
			e.observed = observed
		}
	}
	return nil
}

func (s elShell) Send(msgs []protocols.Message) {
	r, n := s.r, s.n
	_, er := s.el()
	for _, m := range msgs {
		if !r.hasPeer(n, m) {
			continue
		}
		r.send(n, m)
		if m.Kind == protocols.MsgVoteResp && !m.Reject {
			if er.spec.Checks.VoteOncePerTerm {
				k := voteKey{n.idx, m.Term}
				if prev, ok := er.votes[k]; ok && prev != m.To {
					r.violate(InvVoteOnce, "election %s: n%d granted its term-%d vote to n%d and to n%d", er.spec.Name, n.idx+1, m.Term, prev, m.To)
				}
				er.votes[k] = m.To
			}
			if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextVoteGrant {
				r.crashNext = n.idx
			}
		}
	}
}

func (s elShell) ApplyPeers(peers []core.PeerChange) {
	e, er := s.el()
	s.r.applyPeers(s.n, e.want, er.spec.Name, peers)
}

func (s elShell) Gossip(anns []observe.Announcement) {
	for _, ann := range anns {
		s.r.gossip(s.n, ann.Append(nil))
	}
}

// PublishDigest: gossip metadata carries the default election's digest
// only (agent/agent.go).
func (s elShell) PublishDigest(string, string) {}

// Publish checks that a session election's new leader holds a session:
// leadership is given when a node publishes leading an epoch it did not
// lead before; one that keeps leading after its last session ended is
// the protocol's hand-over window, as for a failing health check. A
// majority leader publishes leading only once its lease holds, which may
// be after its session ended: it was given leadership when it won the
// campaign, so one that held a session when it campaigned for the term
// is in that window too.
func (s elShell) Publish(st api.Status) {
	e, er := s.el()
	if st.Role != api.RoleLeader || st.Epoch == e.leading {
		return
	}
	e.leading = st.Epoch
	if !er.spec.Checks.SessionLeader || !er.session.Required || e.c.Sessions() > 0 {
		return
	}
	if pst, _ := e.c.Leader(s.r.local(s.n)); e.campaignHeld && pst.Term == e.campaign {
		return
	}
	s.r.violate(InvSession, "n%d became leader of election %s in epoch %d while it held no session", s.n.idx+1, er.spec.Name, st.Epoch)
}

// Settle tells the holders of the sessions the core ended that they
// are over; the simulator starts no consistent reads nor voter changes
// in named elections.
func (s elShell) Settle(_ []core.Confirmation, _ []core.VoterResult, ends []core.SessionEnd) {
	e, _ := s.el()
	for _, end := range ends {
		e.held = slices.DeleteFunc(e.held, func(h heldSession) bool { return h.id == end.ID })
	}
}

// FireHooks: the simulated nodes run no hooks.
func (s elShell) FireHooks(core.Transition) {}
