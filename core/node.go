package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// Logger receives the core's log lines as structured key/value pairs (zap's
// SugaredLogger satisfies it). The core logs what an operator needs to see:
// members up, down, suspected, changing identity, refused.
type Logger interface {
	Debugw(msg string, keysAndValues ...any)
	Infow(msg string, keysAndValues ...any)
	Warnw(msg string, keysAndValues ...any)
	Errorw(msg string, keysAndValues ...any)
}

type nopLogger struct{}

func (nopLogger) Debugw(string, ...any) {}
func (nopLogger) Infow(string, ...any)  {}
func (nopLogger) Warnw(string, ...any)  {}
func (nopLogger) Errorw(string, ...any) {}

// Config builds a Node.
type Config struct {
	// Name is the election's name when the agent runs several (""
	// or "default": the default election, whose messages, announcements
	// and gossip metadata stay as they were before named elections).
	Name string
	// Election is the protocol to run. Its Self names this agent; its
	// Members are ignored (members arrive as membership events).
	Election ProtocolSpec
	// Detector parameterises every phi detector.
	Detector phi.Config
	// Liveness holds the phi detectors, one per peer, shared by every
	// election of the agent (core/liveness.go); it must have been made
	// with Detector. Nil: this Node keeps its own.
	Liveness *Liveness
	// Gossip says the cluster spreads gossip broadcasts, which turns on
	// the observers' slow path in majority (protocols/observe): the
	// leader heartbeats only voters and announces itself by gossip.
	Gossip bool
	// Reachable reports whether the transport heard from a member
	// recently. It is the one question the core asks its shell: quorum
	// health counts voters the transport reaches, not the ones gossip
	// lists. Nil: every live member counts as reachable.
	Reachable func(protocols.ID) bool
	// Meta is this agent's node.meta, reported as leader_meta while it
	// leads.
	Meta api.Meta
	// GossipAddr and TransportAddr are this agent's published addresses,
	// reported in its status.
	GossipAddr, TransportAddr string
	// Logger receives log lines; nil discards them.
	Logger Logger
	// ObservedEpoch is the last Ready.ObservedEpoch the shell persisted
	// before this start (0 if none): the floor below which the epoch this
	// agent reports never goes, though what it learned by gossip was
	// lost with the restart (docs/design.md §1.2).
	ObservedEpoch uint64
	// ConfirmTimeout bounds a consistent read's quorum round
	// (ConfirmLeadership); zero means the election timeout.
	ConfirmTimeout time.Duration
	// Session makes this agent's candidacy held by local processes'
	// sessions (core/session.go); zero: it stands whenever healthy.
	Session SessionPolicy
	// FollowsGroup: this election follows its fate-sharing group's
	// anchor, and this agent stands in it only while it leads the anchor
	// (core/group.go, SetGroupLead).
	FollowsGroup bool
	// Unsafe plants deliberate policy bugs (simulator tests only).
	Unsafe Unsafe
}

// Unsafe lists deliberately broken policies, each one a liveness bug found
// before with real processes. They exist so that the simulator's tests can
// show the checker catches them; the agent never sets them.
type Unsafe struct {
	// NoWatchLeader: a leader learned from an announcement (ring's
	// LEADER, bully's COORDINATOR) gets no detector until its first
	// heartbeat, so a leader that dies in between is never suspected and
	// failover waits for gossip to declare it dead.
	NoWatchLeader bool
	// KeepDetectors: detectors are not forgotten when leadership
	// changes, so a former leader that falls silent (it no longer
	// heartbeats) stays suspected and a restarted ring member is skipped
	// for ever.
	KeepDetectors bool
	// NoPeerOnReturn: a member that comes back from dead is not given
	// back its transport peer, so nothing is ever sent to it.
	NoPeerOnReturn bool
	// HeartbeatsOnlyClear: only a heartbeat clears a suspicion, so a
	// live member that never heartbeats this node (a ring candidate, a
	// follower) stays suspected, and skipped, for ever.
	HeartbeatsOnlyClear bool
	// WatchRivals: a heartbeat from a leader this node does not follow
	// starts a watch, which accuses that leader for ever once it steps
	// down and falls silent.
	WatchRivals bool
	// ForgetObserved: the epoch an observer reports from gossip is never
	// handed to the shell to persist (Ready.ObservedEpoch), so after a
	// restart it reports its protocol's older epoch until the next
	// announcement (docs/simulator.md, finding 3).
	ForgetObserved bool
}

// PeerChange is a transport peer to add (or update) or remove.
type PeerChange struct {
	ID       protocols.ID
	PeerID   string
	PeerAddr string
	// Remove drops the peer: its sender, queue and connections.
	Remove bool
	// Name is the member's name, for the shell's log lines.
	Name string
	// Probe: the transport keeps the member's reachability known by
	// probing it when silent (transport.Transport.SetProbed). Off only
	// where nothing of this node's depends on it (probeScope).
	Probe bool
}

// Announcement is a leader announcement the observers' gossip path carries
// (protocols/observe): the shell gossips it and hands what it receives to
// Gossiped, so the agent needs no protocol package of its own.
type Announcement = observe.Announcement

// Confirmation settles a consistent read started by ConfirmLeadership.
type Confirmation struct {
	Token uint64
	// Err is nil when a quorum confirmed leadership, ErrConfirmTimeout or
	// ErrLostLeadership otherwise.
	Err error
}

// Errors that settle a consistent read or refuse to start one.
var (
	ErrConfirmUnsupported = errors.New("protocol has no quorum to confirm leadership with; only majority does")
	ErrConfirmTimeout     = errors.New("no quorum confirmed leadership")
	ErrLostLeadership     = errors.New("lost leadership while confirming it")
)

// Ready is one batch of work for the shell. This is the driver contract,
// written once; docs/design.md §3, the agent and the simulator point here,
// and both carry it out through Drain:
//
//  1. Persist HardState, then ObservedEpoch, durably (fsync), before
//     anything below: a message may rest on a vote or a term, a published
//     status on an epoch. If persisting fails, carry out nothing else and
//     do not call Advance: the batch stays pending in the core, and the
//     shell stops (the agent exits; its state on disk is the last good one).
//  2. Apply Peers (add, re-address or remove transport peers) in their
//     order, before the send, so that a message of this batch to a member
//     just learned reaches it.
//  3. Send Messages.
//  4. Gossip Announcements.
//  5. Publish Digest and DigestExt in this agent's gossip metadata.
//  6. Publish Status to local watchers, then fire the hooks configured
//     for Transition (its On).
//  7. Settle Confirmations and VoterResults: answer the consistent reads
//     and the voter changes they name.
//  8. Call Advance(rd). Only Advance acknowledges: the core drops what rd
//     carried then, and not before, so a batch the shell could not carry
//     out is never lost.
//
// Ready must not be called again before Advance: it panics, since a second
// batch would repeat the first's messages or reorder them.
type Ready struct {
	HardState *protocols.HardState
	// ObservedEpoch, when not zero, is a higher epoch this agent is about
	// to report from gossip. The shell makes it durable before publishing
	// Status and hands the last one back at start (Config.ObservedEpoch),
	// so the reported epoch never goes back across a restart. It rises
	// only with the leader an observer learns, so it is rarely set.
	ObservedEpoch uint64
	Messages      []protocols.Message
	Peers         []PeerChange
	// Announcements are gossiped; each one's Age is its age at the
	// moment the core produced it (the shell adds how long it held it).
	Announcements []observe.Announcement
	// Status is the new status when who leads, in which role or epoch
	// changed; nil otherwise.
	Status *api.Status
	// Transition, when not nil, is a change of leadership the hooks have
	// not fired for (core/hooks.go); it comes with Status.
	Transition *Transition
	// Digest, when not empty, is this node's new settings digest, to
	// publish in gossip metadata with DigestExt, its extension (which may
	// be empty; docs/voters.md).
	Digest, DigestExt string
	Confirmations     []Confirmation
	// VoterResults settle voter changes started by ProposeVoters.
	VoterResults []VoterResult
	// SessionsEnded are sessions the core ended (core/session.go): the
	// shell tells their holders.
	SessionsEnded []SessionEnd

	proto     protocols.Ready
	hasProto  bool
	digestOut bool // Digest is handed out (it may be empty)
}

// Stats are the core's counters, for metrics.
type Stats struct {
	LeaderChanges    uint64
	ElectionsStarted uint64
	ElectionsWon     uint64
	Sent             map[protocols.MessageKind]uint64
	Received         map[protocols.MessageKind]uint64
	// StepErrors counts messages refused, by the protocol or because
	// gossip never introduced their sender, and gossiped announcements
	// beyond the ceiling.
	StepErrors uint64
	// BeyondCeiling counts messages and announcements refused for a term
	// or epoch beyond protocols.Ceiling (also in StepErrors).
	BeyondCeiling uint64
	// Leaderless is the time this agent's view spent without a leader
	// each time it lost one, until it knew the next (failover as this
	// agent saw it): counts per bucket of LeaderlessBuckets (the last
	// counts the rest), their sum and their number.
	Leaderless      [len(LeaderlessBuckets) + 1]uint64
	LeaderlessSum   time.Duration
	LeaderlessCount uint64
}

// LeaderlessBuckets are the upper bounds of Stats.Leaderless's buckets:
// around the default failover bound (300 ms) finely, and out to a minute.
var LeaderlessBuckets = [...]time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
}

// Node is one agent's pure core. It is not safe for concurrent use: the
// agent's loop goroutine owns it.
type Node struct {
	cfg Config
	// wire is the election's name as its messages and announcements
	// carry it: "" for the default election.
	wire  string
	log   Logger
	proto protocols.Protocol
	self  protocols.Member

	members map[string]membership.Member
	byID    map[protocols.ID]string
	// rejoinNames is members' names, sorted, for RejoinViewInto; nil
	// when a name came or went since.
	rejoinNames []string
	// live holds the phi detectors, shared with the agent's other
	// elections (Config.Liveness); watching the members this election
	// watches in it (core/detect.go).
	live      *Liveness
	watching  map[protocols.ID]bool
	suspected map[protocols.ID]bool
	// unreached are the live members last told to a protocols.ReachSetter
	// as not reached by the transport (core/reach.go).
	unreached map[protocols.ID]bool
	// priorityDue holds suspected members whose gossip priority changed:
	// the protocol gets it once the suspicion clears (priorityChanged).
	priorityDue map[protocols.ID]bool
	// refused holds live members refused for claiming an id another
	// member holds, by name; they are admitted once the id is free.
	refused map[string]membership.Member

	obs      observers
	lastView viewKey
	seq      uint64 // views published so far: api.Status.Seq
	confirms []confirmWait
	// Voter changes (core/voterchange.go): waiting, and settled for the
	// next Ready.
	voterReqs []voterRequest
	voterDone []VoterResult
	voterSeq  uint64
	stats     Stats

	// vt follows voter changes and the settings digest (core/voters.go).
	vt voterTrack
	// now is the time of the latest input, for decisions taken in Ready.
	now protocols.Time

	// Health (core/health.go): the candidacy last given to the protocol,
	// the shell's report, and the last leader meta decoded from gossip.
	candidacy    protocols.Candidacy
	facts        Health // the shell's last health facts (SetHealth)
	health       *api.HealthReport
	metaRaw      string
	meta         api.Meta
	forcePublish bool

	// leaderlessSince is when this agent's view lost its leader, while
	// leaderless (Stats.Leaderless).
	leaderlessSince protocols.Time
	leaderless      bool

	// stop is the shutdown handover's state (core/shutdown.go).
	stop shutdownState
	// sess are the local processes' sessions (core/session.go).
	sess sessions
	// groupLead: this agent leads the anchor of the group this election
	// follows (core/group.go).
	groupLead bool

	// probe is the probe scope last handed to the shell (core/probe.go).
	probe probeScope

	// readyOut: a Ready was handed out and not yet advanced.
	readyOut bool

	// Pending output, handed out by Ready and dropped by Advance.
	peers    []PeerChange
	announce []observe.Announcement
	pending  *api.Status
	settled  []Confirmation
	// hook is the transition to fire hooks for; hooked the last one the
	// shell acknowledged firing (core/hooks.go).
	hook   *Transition
	hooked Transition
}

// New builds a Node from a configuration and the persisted state in
// cfg.Election.HardState. Members arrive later, as membership events.
func New(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = nopLogger{}
	}
	live := cfg.Liveness
	if live == nil {
		var err error
		if live, err = NewLiveness(cfg.Detector); err != nil {
			return nil, err
		}
	} else if live.Config() != cfg.Detector {
		return nil, fmt.Errorf("core: election %q: its detector settings differ from the shared Liveness's", cfg.Name)
	}
	if p := electionNameProblem(cfg.Name); p != "" {
		return nil, fmt.Errorf("core: election name %q %s", cfg.Name, p)
	}
	if cfg.ObservedEpoch > protocols.Ceiling {
		return nil, fmt.Errorf("core: observed epoch %d: %w (the ceiling is %d)", cfg.ObservedEpoch, protocols.ErrBeyondCeiling, protocols.Ceiling)
	}
	spec := cfg.Election
	spec.Members = nil
	if spec.Rand == nil {
		return nil, errors.New("core: Config.Election.Rand is nil")
	}
	p, err := NewProtocol(spec)
	if err != nil {
		return nil, err
	}
	// The protocol starts with spec.Candidacy; SetHealth changes it.
	n := &Node{
		cfg:       cfg,
		wire:      wireName(cfg.Name),
		log:       cfg.Logger,
		proto:     p,
		self:      spec.Self,
		members:   make(map[string]membership.Member),
		byID:      make(map[protocols.ID]string),
		live:      live,
		watching:  make(map[protocols.ID]bool),
		suspected: make(map[protocols.ID]bool),
		refused:   make(map[string]membership.Member),
		candidacy: spec.Candidacy,
		// Ineligible at start for reasons the shell's first SetHealth
		// names (checks not run yet, maintenance).
		// A session-held candidacy starts ineligible for want of a
		// session, which is not a health fact.
		facts: Health{ChecksFailing: spec.Candidacy.Ineligible && !cfg.Session.Required && !cfg.FollowsGroup},
	}
	n.stats.Sent = make(map[protocols.MessageKind]uint64)
	n.stats.Received = make(map[protocols.MessageKind]uint64)
	n.initObservers()
	n.settle(spec.Now)
	return n, nil
}

// Tick advances time: the protocol's timers, the detectors, the
// observers' announcements and consistent reads' deadlines.
func (n *Node) Tick(now protocols.Time) {
	n.tellReach(now)
	n.proto.Tick(now)
	n.checkDetectors(now)
	n.expireSessions(now)
	n.settle(now)
}

// Step feeds a peer's message to the detectors and the protocol. A message
// from an id gossip has not introduced is refused.
func (n *Node) Step(now protocols.Time, m protocols.Message) error {
	defer n.settle(now)
	if m.Election != n.wire {
		n.stats.StepErrors++
		return fmt.Errorf("core: message of election %q handed to election %q", m.Election, n.wire)
	}
	if _, known := n.byID[m.From]; !known {
		n.stats.StepErrors++
		return fmt.Errorf("core: message from id %d, which gossip has not introduced", m.From)
	}
	if n.settingsConflict(m.From) {
		n.stats.StepErrors++
		return fmt.Errorf("core: message from %s, whose settings disagree with this agent's (docs/voters.md)", n.byID[m.From])
	}
	n.stats.Received[m.Kind]++
	if m.Kind == protocols.MsgHeartbeat || m.Kind == protocols.MsgHeartbeatResp {
		n.heard(now, m.From)
	}
	err := n.proto.Step(now, m)
	n.stepped(now, m)
	if err != nil {
		n.stats.StepErrors++
		if errors.Is(err, protocols.ErrBeyondCeiling) {
			n.stats.BeyondCeiling++
		}
		return fmt.Errorf("core: %w", err)
	}
	return nil
}

// Resign asks a leader to hand leadership over (protocols.Protocol.Resign).
func (n *Node) Resign(now protocols.Time) error {
	defer n.settle(now)
	return n.proto.Resign(now)
}

// HasReady reports whether Ready has anything to hand out.
func (n *Node) HasReady() bool {
	return n.proto.HasReady() || len(n.peers) > 0 || len(n.announce) > 0 || n.pending != nil || n.hook != nil || len(n.settled) > 0 || len(n.voterDone) > 0 || len(n.sess.ended) > 0 ||
		!n.vt.published || n.obs.persist != 0
}

// Ready hands out everything pending, without consuming it: Advance does
// (the contract on type Ready). It panics when the previous Ready was not
// advanced.
func (n *Node) Ready() Ready {
	if n.readyOut {
		panic("core: Ready called again before Advance (the driver contract on core.Ready)")
	}
	n.readyOut = true
	var rd Ready
	if n.proto.HasReady() {
		rd.proto, rd.hasProto = n.proto.Ready(), true
		rd.HardState = rd.proto.HardState
		rd.Messages = make([]protocols.Message, 0, len(rd.proto.Messages))
		for _, m := range rd.proto.Messages {
			if n.fastPath(m) {
				m.Election = n.wire
				rd.Messages = append(rd.Messages, m)
			}
		}
	}
	rd.ObservedEpoch = n.obs.persist
	rd.Peers = n.peers
	rd.Announcements = n.announce
	if n.wire != "" && len(n.announce) > 0 {
		rd.Announcements = make([]observe.Announcement, len(n.announce))
		for i, a := range n.announce {
			a.Election = n.wire
			rd.Announcements[i] = a
		}
	}
	rd.Status = n.pending
	rd.Transition = n.hook
	rd.Confirmations = n.settled
	rd.VoterResults = n.voterDone
	rd.SessionsEnded = n.sess.ended
	if !n.vt.published {
		rd.Digest, rd.DigestExt, rd.digestOut = n.vt.digest, n.vt.digestExt, true
	}
	return rd
}

// Advance tells the core that rd, the last Ready, was carried out: what it
// carried is dropped and counted now. Anything that became pending after
// that Ready stays for the next one.
func (n *Node) Advance(rd Ready) {
	n.readyOut = false
	if rd.hasProto {
		n.proto.Advance(rd.proto)
	}
	for _, m := range rd.Messages {
		n.stats.Sent[m.Kind]++
	}
	if n.obs.persist == rd.ObservedEpoch {
		n.obs.persist = 0
	}
	n.peers = dropFront(n.peers, len(rd.Peers))
	n.announce = dropFront(n.announce, len(rd.Announcements))
	if n.pending == rd.Status {
		n.pending = nil
	}
	if rd.Transition != nil {
		n.hooked = *rd.Transition
		if n.hook == rd.Transition {
			n.hook = nil
		}
	}
	n.settled = dropFront(n.settled, len(rd.Confirmations))
	n.voterDone = dropFront(n.voterDone, len(rd.VoterResults))
	n.sess.ended = dropFront(n.sess.ended, len(rd.SessionsEnded))
	if rd.digestOut && rd.Digest == n.vt.digest && rd.DigestExt == n.vt.digestExt {
		n.vt.published = true
	}
}

// dropFront removes the first k items of s (those a Ready handed out).
func dropFront[T any](s []T, k int) []T {
	if k >= len(s) {
		return nil
	}
	return append([]T(nil), s[k:]...)
}

// NextWake is the latest time the shell may sleep until before it must
// call Tick: the protocol's next timer, the moment a watched member's phi
// would cross the threshold, the next announcement or a consistent read's
// deadline. ok is false for a protocol that cannot name its timers, which
// must be ticked at a fixed rate.
func (n *Node) NextWake(now protocols.Time, limit time.Duration) (protocols.Time, bool) {
	next := now.Add(limit)
	dl, ok := n.proto.(protocols.Deadliner)
	if !ok {
		return next, false
	}
	if t, armed := dl.NextDeadline(now); armed && t < next {
		next = t
	}
	for id := range n.watching {
		if n.suspected[id] {
			continue
		}
		// Cached per heartbeat in the shared detector (Liveness).
		if t, at := n.live.suspectAtOf(id); at && t < next {
			next = t
		}
	}
	if t, ok := n.announceDeadline(); ok && t < next {
		next = t
	}
	for _, w := range n.confirms {
		if w.deadline < next {
			next = w.deadline
		}
	}
	if t, ok := n.voterDeadline(); ok && t < next {
		next = t
	}
	if t, ok := n.shutdownDeadline(); ok && t < next {
		next = t
	}
	if t, ok := n.sessionDeadline(); ok && t < next {
		next = t
	}
	return next, true
}

// Stats returns a copy of the counters.
func (n *Node) Stats() Stats {
	s := n.stats
	s.Sent = make(map[protocols.MessageKind]uint64, len(n.stats.Sent))
	for k, v := range n.stats.Sent {
		s.Sent[k] = v
	}
	s.Received = make(map[protocols.MessageKind]uint64, len(n.stats.Received))
	for k, v := range n.stats.Received {
		s.Received[k] = v
	}
	return s
}

// ProtocolStatus is the protocol's own status at now (observer knowledge
// from gossip is not merged in; see Status for that).
func (n *Node) ProtocolStatus(now protocols.Time) protocols.Status { return n.proto.Status(now) }

// NewRand returns a generator for Config.Election.Rand seeded from the
// given values; the shell picks them (time, pid), the simulator its seed.
func NewRand(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }
