package sim

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// This file is core mode (Options.Core): every simulated node is a
// core.Node driven exactly as agent/agent.go drives it. Inputs are
// core.Step for delivered messages (heartbeats feed the core's own phi
// detectors), core.Tick at the core's NextWake, core.ApplyMember for the
// membership model's events (membermodel.go), core.Gossiped for gossip
// deliveries and core.Resign; a Ready is carried out in the agent's order:
// persist, send (only to ids the transport peer table holds), apply peer
// changes, gossip announcements.

// CoreFactory returns the core configuration of one simulated node. The
// simulator sets Config.Reachable from its network model. It is called
// from the run's single goroutine and must be deterministic given its
// NodeConfig.
type CoreFactory func(cfg NodeConfig) (core.Config, error)

// Timing of the agent's loop (agent/agent.go): a protocol without
// deadlines is ticked every coreTickInterval, and no sleep is longer than
// coreMaxSleep or shorter than coreMinSleep.
const (
	coreTickInterval = 10 * time.Millisecond
	coreMaxSleep     = 250 * time.Millisecond
	coreMinSleep     = 200 * time.Microsecond
)

// Gossip model: an announcement reaches every node its sender is connected
// to after gossipMinDelay plus up to gossipSpread, twice with probability
// gossipDupProb.
const (
	gossipMinDelay = 10 * time.Millisecond
	gossipSpread   = 290 * time.Millisecond
	gossipDupProb  = 0.1
)

// Event kinds of core mode; the bare loop hands them to coreEvent.
const (
	evGossip   eventKind = 100 + iota // announcement arg arrives at node
	evMembers                         // the membership model's scan
	evFailover                        // failover probe deadline (inc = stage)
)

// coreNode is a node's core-mode state.
type coreNode struct {
	c *core.Node
	// live is the node's phi detectors, shared by its elections.
	live *core.Liveness
	// peers is the transport's peer table, built from Ready.Peers: id to
	// peer id. It is empty at every start, as a new transport is.
	peers map[protocols.ID]string
	// peerGen numbers the node's libp2p identities; newIdentity asks the
	// next start for a new one.
	peerGen     uint32
	newIdentity bool
	pid         string // the current peer id (peerID)
	// left: the node left gracefully and is stopped (crashed is set too).
	left bool
	// leave is a graceful leave under way: the core hands leadership
	// over (core.Node.Shutdown) while the node keeps running, as the
	// agent's loop does, and the node leaves once the core is done.
	leave *pendingLeave
	// observed is the durable observed epoch (Ready.ObservedEpoch), kept
	// across crashes like the HardState and handed back at every start.
	observed uint64
	// digest and digestExt are the settings digest the node publishes in
	// its gossip metadata (Ready.Digest); metaGen counts its changes, each
	// of which memberlist gossips as an update of the member.
	digest, digestExt string
	metaGen           uint32
	// els are the node's named elections (Options.Elections), and
	// defWant the members the default election asked a transport peer
	// for, when it shares peers with them (elections.go).
	els     []*elNode
	defWant map[protocols.ID]bool
	wakes   []protocols.Time // nextWake's scratch
	// join is the node's gossip.join (node indices; none unless a seed
	// split set it) and snap the member snapshot it started with; wiped
	// makes the next start forget every address but wipeKnows
	// (rejoin.go). rejoin is the agent's rejoin glue, new at every start.
	join, snap []int
	wiped      bool
	wipeKnows  []int
	rejoin     core.RejoinCheck
	// files are the addresses of join, then of snap, for the rejoin
	// input: the first nJoin are gossip.join.
	files []string
	nJoin int
}

// pendingLeave is a FaultLeave waiting for its node's core to finish the
// shutdown handover: the action, and how long the node stays away once
// it left.
type pendingLeave struct {
	action int32
	away   time.Duration
}

func (c *coreNode) peerID(idx int) string {
	if c.pid == "" {
		c.pid = fmt.Sprintf("peer-n%d-%d", idx+1, c.peerGen)
	}
	return c.pid
}

// Failover probe stages (Checks.FailoverBound).
const (
	probeNone    = iota
	probeResign  // the leader resigned; the next claimant will crash
	probeCrashed // the claimant crashed; waiting for agreement
	probeDone
	// probeObservers is the deadline of observers in the crashed stage:
	// FailoverBound plus observe.RefreshInterval, since a leader that
	// learns of an observer only after it started leading announces
	// itself to it at the next refresh.
	probeObservers
)

// coreRun is a run's core-mode state.
type coreRun struct {
	view [][]memberView // view[observer][member]
	// knows is the address knowledge of rejoin.go: knows[o][m], o's
	// memberlist or files name m; addrs maps a gossip address to its node.
	knows    [][]bool
	addrs    map[string]int
	addrList []string // addrList[i] = memberAddr(i)
	// heard is, per member, the newest state of it any observer learned
	// from its own news (rejoin.go): what a push-pull's answer carries.
	heard []heardState
	// wipedAt is, per node, when its wiped restart was (+1; 0: none
	// pending), until it and the others have found each other.
	wipedAt []time.Duration
	// rejoin: the schedule has an address fault, and the nodes run the
	// agent's rejoin glue (rejoin.go).
	rejoin   bool
	payloads [][]byte // gossiped announcements, by event arg
	scanning bool     // the membership scan is queued
	probe    int
	// probeEpoch is the epoch the resigning leader led; probeAt when the
	// claimant crashed.
	probeEpoch uint64
	probeAt    time.Duration
	// votersAgreed: every live voter followed the new leader.
	votersAgreed bool
}

func newCoreRun(n int) *coreRun {
	cr := &coreRun{view: make([][]memberView, n), knows: newKnows(n), addrs: make(map[string]int, n), heard: make([]heardState, n), wipedAt: make([]time.Duration, n)}
	for i := range cr.view {
		cr.view[i] = make([]memberView, n)
		cr.addrs[memberAddr(i)] = i
		cr.addrList = append(cr.addrList, memberAddr(i))
	}
	return cr
}

// coreProto lets the bare loop's checker, resign and describe read a core
// node like a protocol: Status is core.Node.Leader, which merges observer
// knowledge from gossip, so the checker sees what the socket reports.
type coreProto struct {
	c *core.Node
	// els are the node's named elections (elections.go): the health
	// nemesis reaches every election, as the agent's health glue does.
	els []*elNode
}

func (p coreProto) Step(now protocols.Time, m protocols.Message) error { return p.c.Step(now, m) }
func (p coreProto) Tick(now protocols.Time)                            { p.c.Tick(now) }
func (p coreProto) MemberUp(protocols.Time, protocols.Member)          {}
func (p coreProto) MemberDown(protocols.Time, protocols.ID)            {}
func (p coreProto) Suspect(protocols.Time, protocols.ID, bool)         {}
func (p coreProto) Resign(now protocols.Time) error                    { return p.c.Resign(now) }
func (p coreProto) HasReady() bool                                     { return false }
func (p coreProto) Ready() protocols.Ready                             { return protocols.Ready{} }
func (p coreProto) Advance(protocols.Ready)                            {}

// SetCandidacy gives the core the health nemesis's eligibility as the
// agent's health glue does (core.Node.SetHealth): as a fact (here,
// maintenance) from which the core decides the candidacy. Priorities are
// the configuration's, fixed for the run.
func (p coreProto) SetCandidacy(now protocols.Time, c protocols.Candidacy) {
	p.c.SetHealth(now, core.Health{Maintenance: c.Ineligible})
	for _, e := range p.els {
		e.c.SetHealth(now, core.Health{Maintenance: c.Ineligible})
	}
}

// ChangeVoters gives the core a voter change as the agent's voters glue
// does (core.Node.ProposeVoters): the core's checks, the protocol's, the
// retry of an add the protocol cannot count yet, and the wait for the
// commit are the core's. Its outcome arrives in a later Ready, which the
// simulator drops: the checker judges the configurations, not the
// caller's answer.
func (p coreProto) ChangeVoters(now protocols.Time, c protocols.VoterChange) error {
	_, err := p.c.ProposeVoters(now, c)
	return err
}

// Problems returns the core's problem lines (configuration conflicts,
// settings digests, voters not reached).
func (p coreProto) Problems() []string { return p.c.Status(0).Problems.List() }

var _ protocols.VoterChanger = coreProto{}

func (p coreProto) Status(now protocols.Time) protocols.Status {
	st, _ := p.c.Leader(now)
	return st
}

// startCore builds n's core from its persisted state with no members:
// they arrive from the membership model, as from memberlist.
func (r *run) startCore(n *node) error {
	cfg, err := r.o.Core(NodeConfig{
		Self:              n.member,
		Voters:            r.voters,
		Members:           append([]protocols.Member(nil), r.mems...),
		HardState:         n.hs,
		Now:               r.local(n),
		Candidacy:         r.startCandidacy(n.idx),
		Rand:              core.NewRand(r.rng.Uint64(), r.rng.Uint64()),
		ElectionTimeout:   r.o.ElectionTimeout,
		HeartbeatInterval: r.o.HeartbeatInterval,
		MaxClockDrift:     r.o.MaxClockDrift,
	})
	if err != nil {
		return fmt.Errorf("sim: core factory for n%d: %w", n.idx+1, err)
	}
	idx := n.idx
	if r.o.Trace != nil && cfg.Logger == nil {
		cfg.Logger = traceLogger{r: r, idx: idx}
	}
	cfg.Reachable = r.reachFunc(idx)
	cfg.ObservedEpoch = n.cn.observed
	// One detector per peer shared by every election of the node, as the
	// agent builds it; a restart starts with none, as a new process does.
	if n.cn.live, err = core.NewLiveness(cfg.Detector); err != nil {
		return fmt.Errorf("sim: detectors for n%d: %w", n.idx+1, err)
	}
	cfg.Liveness = n.cn.live
	c, err := core.New(cfg)
	if err != nil {
		return fmt.Errorf("sim: core for n%d: %w", n.idx+1, err)
	}
	cn := n.cn
	if cn.newIdentity {
		cn.peerGen++
		cn.newIdentity, cn.pid = false, ""
	}
	cn.c, cn.left, cn.leave = c, false, nil
	cn.peers = make(map[protocols.ID]string)
	n.p = coreProto{c: c, els: cn.els}
	if len(cn.els) > 0 {
		if err := r.startElections(n); err != nil {
			return err
		}
	}
	n.crashed, n.paused = false, false
	n.lastValid = false
	for j := range r.cm.view[idx] {
		r.cm.view[idx][j] = memberView{}
	}
	r.startMembers(n)
	if !r.cm.scanning {
		r.cm.scanning = true
		r.q.push(event{at: r.now + membersScan, kind: evMembers})
	}
	r.drainCore(n)
	return nil
}

// drainCore carries out n's Ready batches through core.Drain, as the
// agent does (the driver contract on core.Ready), with coreShell as the
// shell, then arms n's next tick at the core's NextWake.
func (r *run) drainCore(n *node) {
	if c := n.cn.c; c != nil {
		if err := core.Drain(c, coreShell{r, n}); err != nil {
			r.violate(InvDriver, "n%d: %v", n.idx+1, err)
			return
		}
		if len(n.cn.els) > 0 && !r.drainElections(n) {
			return
		}
		if stopDone(n) && n.cn.leave != nil {
			r.finishLeave(n)
			r.healthFire()
			return
		}
	}
	r.healthFire()
	r.rearm(n)
}

// finishLeave stops n once its core finished the shutdown handover, and
// schedules its return (at once after the heal).
func (r *run) finishLeave(n *node) {
	l := n.cn.leave
	n.cn.leave = nil
	r.crash(n)
	n.cn.left = true
	n.fault++
	if r.healed {
		// The heal restarted every stopped node; one whose handover
		// outlasted the fault phase returns at once, as they did.
		r.restart(n)
		return
	}
	r.q.push(event{at: r.now + l.away, kind: evUndo, arg: l.action, node: int32(n.idx), inc: n.fault})
}

// coreShell is the simulator as core.Drain's shell for node n: durable
// state, the network and the membership model.
type coreShell struct {
	r *run
	n *node
}

// Persist keeps the HardState and the observed epoch at once (a crash
// takes back only what was never handed to the shell).
func (s coreShell) Persist(hs *protocols.HardState, observed uint64) error {
	r, n := s.r, s.n
	if hs != nil {
		n.hs = *hs
		r.persistedConfig(n)
		r.lastPersist = n.idx
		if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextPersist {
			r.crashNext = n.idx
		}
		r.rec(traceRec{kind: recPersist, node: int32(n.idx), a: n.hs.Term, b: uint64(n.hs.Vote), c: n.hs.Epoch})
		r.healthPersisted(n)
	}
	if observed != 0 {
		n.cn.observed = observed
	}
	return nil
}

// Send delivers to ids in the sender's peer table only, as the transport.
func (s coreShell) Send(msgs []protocols.Message) {
	r, n := s.r, s.n
	for _, m := range msgs {
		r.healthWon(n, m)
		if !r.hasPeer(n, m) {
			continue
		}
		r.send(n, m)
		r.handoverSent(n, m)
		if m.Kind == protocols.MsgVoteResp && !m.Reject {
			r.voted(n, m)
			if r.armed >= 0 && r.crashNext < 0 && r.sched.Actions[r.armed].Target == TargetNextVoteGrant {
				r.crashNext = n.idx
			}
		}
	}
}

func (s coreShell) ApplyPeers(peers []core.PeerChange) {
	if len(s.n.cn.els) > 0 {
		// A peer table shared by several elections (elections.go).
		s.r.applyPeers(s.n, s.n.cn.defWant, "", peers)
		return
	}
	for _, p := range peers {
		if p.Remove {
			delete(s.n.cn.peers, p.ID)
		} else {
			s.n.cn.peers[p.ID] = p.PeerID
		}
		s.r.rec(traceRec{kind: recInput, node: int32(s.n.idx), a: inputPeer, b: uint64(p.ID), c: boolBit(p.Remove)})
	}
}

func (s coreShell) Gossip(anns []observe.Announcement) {
	for _, ann := range anns {
		s.r.gossip(s.n, ann.Append(nil))
	}
}

// PublishDigest puts the digest in the node's gossip metadata: the
// membership model carries a change to the others as an update of the
// member, with the join lag (memberlist's meta update).
func (s coreShell) PublishDigest(digest, ext string) {
	cn := s.n.cn
	if digest != cn.digest || ext != cn.digestExt {
		cn.digest, cn.digestExt = digest, ext
		cn.metaGen++
	}
}

// Publish hands the health check the core's status as the protocol's
// SoftState: given leadership while ineligible. The term lets the check
// tell a majority leader that won eligible (healthWon) and turned
// ineligible while it waited for its lease, the hand-over window, from
// one given leadership while ineligible.
func (s coreShell) Publish(st api.Status) {
	ss := protocols.SoftState{Epoch: st.Epoch}
	var term uint64
	if st.Role == api.RoleLeader {
		ss.Role = protocols.Leader
		pst, _ := s.n.cn.c.Leader(s.r.local(s.n))
		term = pst.Term
	}
	s.r.healthSoft(s.n, ss, term)
}

// Settle has no reader: the simulator starts no consistent reads.
func (s coreShell) Settle([]core.Confirmation, []core.VoterResult, []core.SessionEnd) {}

// FireHooks: the simulated nodes run no hooks.
func (s coreShell) FireHooks(core.Transition) {}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// rearm schedules n's next tick where the agent's loop would wake: the
// core's NextWake on n's clock, converted to virtual time.
func (r *run) rearm(n *node) {
	if n.crashed || n.paused || n.cn.c == nil || r.done {
		return
	}
	now := r.local(n)
	d := coreTickInterval
	if next, ok := nextWake(n, now, core.WakeSlack(r.o.HeartbeatInterval), r.o.ShellBugs.WakeForDefault); ok {
		d = max(next.Sub(now), coreMinSleep)
	}
	n.tickGen++
	v := time.Duration(float64(d) / n.rate)
	r.q.push(event{at: r.now + max(v, 1), kind: evTick, node: int32(n.idx), inc: n.tickGen})
}

// tickCore is the agent's wake-up: Tick at the node's local time.
func (r *run) tickCore(n *node) {
	if n.cn.c == nil || r.done {
		return
	}
	// A candidacy changed while the process was paused reaches it now.
	if r.syncCandidacy(n); n.cn.c == nil || r.done {
		return
	}
	now := r.local(n)
	r.rec(traceRec{kind: recTick, node: int32(n.idx), local: now})
	n.cn.c.Tick(now)
	for _, e := range n.cn.els {
		e.c.Tick(now)
	}
	r.drainCore(n)
	r.writer = n.idx
}

// hasPeer reports whether n's transport can send m: its peer table must
// hold m.To under the destination's current peer id. A message without a
// peer is dropped, as transport.Host.Send drops it.
func (r *run) hasPeer(n *node, m protocols.Message) bool {
	pid, ok := n.cn.peers[m.To]
	to := int(m.To) - 1
	switch {
	case !ok:
		r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropNoPeer, msg: m})
		return false
	case to >= 0 && to < len(r.nodes) && pid != r.nodes[to].cn.peerID(to):
		r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropStalePeer, msg: m})
		return false
	}
	return true
}

// admitted reports whether n's transport accepts a message from m.From: a
// stream from a peer it has not admitted (or under an older identity) is
// refused. It traces the drop.
func (r *run) admitted(n *node, m protocols.Message) bool {
	from := int(m.From) - 1
	pid, ok := n.cn.peers[m.From]
	if ok && from >= 0 && from < len(r.nodes) && pid == r.nodes[from].cn.peerID(from) {
		return true
	}
	r.rec(traceRec{kind: recDrop, node: int32(n.idx), a: dropUnknownPeer, msg: m})
	return false
}

// gossip spreads an encoded announcement from n to every node n is
// connected to, each after a random gossip delay, sometimes twice.
func (r *run) gossip(n *node, b []byte) {
	arg := int32(len(r.cm.payloads))
	r.cm.payloads = append(r.cm.payloads, b)
	for j, to := range r.nodes {
		if j == n.idx || !r.conn[n.idx][j] {
			continue
		}
		copies := 1
		if r.rng.Float64() < gossipDupProb {
			copies = 2
		}
		for range copies {
			d := gossipMinDelay + randDur(r.rng, gossipSpread)
			r.q.push(event{at: r.now + d, kind: evGossip, node: int32(j), inc: to.inc, arg: arg})
		}
	}
}

// coreEvent handles the event kinds only core mode queues.
func (r *run) coreEvent(ev event) {
	switch ev.kind {
	case evGossip:
		n := r.nodes[ev.node]
		if n.crashed || n.paused || n.inc != ev.inc || n.cn.c == nil {
			r.rec(traceRec{kind: recDrop, node: ev.node, a: dropGossip})
			return
		}
		now := r.local(n)
		r.rec(traceRec{kind: recInput, node: ev.node, a: inputGossip, b: uint64(ev.arg)})
		c := r.gossipTarget(n, r.cm.payloads[ev.arg])
		if c == nil {
			return // an election this agent does not run, as the agent ignores it
		}
		if err := c.Gossiped(now, r.cm.payloads[ev.arg]); err != nil {
			r.rec(traceRec{kind: recStepErr, node: ev.node, err: err})
		}
		r.drainCore(n)
	case evSessionKeep:
		r.sessionKeep(ev)
	case evIsoStart:
		if !r.isoProbe() {
			r.done = true
		}
	case evIsoEnd:
		r.iso.on = false
		r.done = true
	case evMembers:
		r.scanMembers()
		r.q.push(event{at: r.now + membersScan, kind: evMembers})
	case evFailover:
		switch {
		case r.cm.probe == probeResign && ev.inc == probeResign:
			r.violate(InvFailover, "no new leader %v after the leader resigned", r.o.Checks.LivenessBound)
		case r.cm.probe == probeCrashed && ev.inc == probeCrashed && !r.cm.votersAgreed:
			r.violate(InvFailover, "no live leader followed by every live voter %v after the next leader crashed", r.o.Checks.FailoverBound)
		case r.cm.probe == probeCrashed && ev.inc == probeObservers:
			r.violate(InvFailover, "observers did not follow the new leader %v after the next leader crashed", r.o.Checks.FailoverBound+observe.RefreshInterval)
		}
	}
}

// coreFault injects the membership faults of core mode.
func (r *run) coreFault(a Action, i, tgt int) {
	nd := r.nodes[tgt]
	if nd.cn == nil || nd.crashed || nd.paused || r.healed || nd.cn.leave != nil {
		return
	}
	if memberFault(a.Kind) && !r.voter(tgt) {
		// Only a voter has a way back (rejoin.go, addressFaultTarget).
		tgt = r.rng.IntN(len(r.voters))
		if nd = r.nodes[tgt]; nd.crashed || nd.paused || nd.cn.leave != nil {
			return
		}
	}
	if a.Kind == FaultSeedSplit {
		r.seedSplit(a, i, tgt)
		return
	}
	r.stats.Faults[a.Kind]++
	r.rec(traceRec{kind: recFault, node: int32(tgt), a: uint64(a.Kind), b: uint64(tgt)})
	if a.Kind == FaultWipedRestart {
		r.wipedRestart(a, i, tgt)
		return
	}
	if a.Kind == FaultLeave {
		// As the agent's shutdown: the core hands leadership over while
		// the node runs on, then the node leaves (finishLeave).
		nd.cn.leave = &pendingLeave{action: int32(i), away: a.Duration}
		nd.cn.c.Shutdown(r.local(nd))
		for _, e := range nd.cn.els {
			e.c.Shutdown(r.local(nd))
		}
		r.drainCore(nd)
		return
	}
	r.isoStart(tgt, a.Kind.String())
	r.crash(nd)
	nd.cn.newIdentity = true
	nd.fault++
	r.q.push(event{at: r.now + a.Duration, kind: evUndo, arg: int32(i), node: int32(tgt), inc: nd.fault})
}

// coreUndo restarts (rejoins) a node a core-mode fault stopped.
func (r *run) coreUndo(a Action, tgt int, gen uint32) {
	nd := r.nodes[tgt]
	if nd.fault != gen || !nd.crashed {
		return
	}
	r.rec(traceRec{kind: recUndo, node: int32(tgt), a: uint64(a.Kind), b: uint64(tgt)})
	r.restart(nd)
}

// startProbe begins the failover probe once every node follows leader
// first in epoch: the leader resigns, and the next node to claim
// leadership is crashed for good. It reports whether the run goes on.
func (r *run) startProbe(first int, epoch uint64) bool {
	b := r.o.Checks.FailoverBound
	if b <= 0 || r.cm.probe != probeNone {
		return false
	}
	nd := r.nodes[first]
	r.rec(traceRec{kind: recFault, node: int32(first), a: uint64(FaultResign), b: uint64(first)})
	r.cm.probeEpoch = epoch
	if err := nd.p.Resign(r.local(nd)); err != nil {
		// No one to hand over to: crash the leader itself.
		r.rec(traceRec{kind: recStepErr, node: int32(first), err: err})
		if !quorumSurvives(nd.st) {
			r.cm.probe = probeDone
			return false
		}
		r.probeCrash(nd)
		return true
	}
	r.cm.probe = probeResign
	r.q.push(event{at: r.now + r.o.Checks.LivenessBound, kind: evFailover, inc: probeResign})
	r.drainCore(nd)
	return true
}

func (r *run) probeCrash(nd *node) {
	r.rec(traceRec{kind: recFault, node: int32(nd.idx), a: uint64(FaultCrash), b: uint64(nd.idx)})
	r.crash(nd)
	r.cm.probe, r.cm.probeAt = probeCrashed, r.now
	r.q.push(event{at: r.now + r.o.Checks.FailoverBound, kind: evFailover, inc: probeCrashed})
	r.q.push(event{at: r.now + r.o.Checks.FailoverBound + observe.RefreshInterval, kind: evFailover, inc: probeObservers})
}

// checkProbe runs after the checker's pass while the probe is on: it
// crashes the first node to claim leadership after the resignation (its
// claim has gone out in the Ready just handled), then waits for every live
// node to follow one live leader.
func (r *run) checkProbe() {
	if r.done {
		return
	}
	switch r.cm.probe {
	case probeResign:
		for _, n := range r.nodes {
			if !n.crashed && n.st.Role == protocols.Leader && n.st.Epoch > r.cm.probeEpoch {
				if !quorumSurvives(n.st) {
					r.cm.probe = probeDone
					r.done = true
					return
				}
				r.probeCrash(n)
				return
			}
		}
	case probeCrashed:
		lead := -1
		for _, n := range r.nodes {
			if !n.crashed && n.st.Role == protocols.Leader {
				if lead >= 0 {
					return
				}
				lead = n.idx
			}
		}
		if lead < 0 {
			return
		}
		l := r.nodes[lead]
		all := true
		for _, n := range r.nodes {
			if !n.crashed && (n.paused || n.st.Leader != l.member.ID || n.st.Epoch != l.st.Epoch) {
				if n.st.Role != protocols.Observer {
					return
				}
				all = false
			}
		}
		r.cm.votersAgreed = true
		if !all {
			return
		}
		r.cm.probe = probeDone
		r.stats.addFailover(r.now - r.cm.probeAt)
		r.rec(traceRec{kind: recLive, node: int32(lead), a: l.st.Epoch})
		r.done = true
	}
}

// traceLogger writes the core's log lines into a printed trace (Options.
// Trace), so that a replay shows the policy's decisions.
type traceLogger struct {
	r   *run
	idx int
	el  string // a named election's name, "" for the default one
}

func (l traceLogger) log(level, msg string, kv []any) {
	if l.el != "" {
		fmt.Fprintf(l.r.o.Trace, "%12.6fs [%s] n%-2d core  %s %s %v\n", l.r.now.Seconds(), l.el, l.idx+1, level, msg, kv)
		return
	}
	fmt.Fprintf(l.r.o.Trace, "%12.6fs n%-2d core  %s %s %v\n", l.r.now.Seconds(), l.idx+1, level, msg, kv)
}

func (l traceLogger) Debugw(msg string, kv ...any) { l.log("debug", msg, kv) }
func (l traceLogger) Infow(msg string, kv ...any)  { l.log("info", msg, kv) }
func (l traceLogger) Warnw(msg string, kv ...any)  { l.log("warn", msg, kv) }
func (l traceLogger) Errorw(msg string, kv ...any) { l.log("error", msg, kv) }

// quorumSurvives reports whether the voters left after st's node crashes
// can still elect: majority with fewer than three voters cannot.
func quorumSurvives(st protocols.Status) bool {
	c := st.Config
	return c.IsZero() || c.Len()-1 >= c.Len()/2+1
}
