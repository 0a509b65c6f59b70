package protocols

import (
	"errors"
	"fmt"
	"time"
)

// ID is a node's unique numeric identity. It orders nodes in bully and ring
// elections (higher wins) and addresses messages. Zero means "no node".
type ID uint64

// None is the zero ID: no node, no vote, no leader.
const None ID = 0

// Member is what a protocol knows about a node: its numeric id, its unique
// human name, and its leadership priority (node.priority, as gossip publishes it;
// bully and ring rank members by (Priority, ID), majority learns it from
// messages instead). A member from an agent that publishes no priority has
// priority 0.
type Member struct {
	ID       ID
	Name     string
	Priority uint8
}

// Time is a reading of the local node's monotonic clock in nanoseconds since
// an arbitrary origin. Protocols compare Times only with Times from the same
// node: clocks of different nodes are unrelated and may run at slightly
// different rates.
type Time int64

// Add returns t moved forward by d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Role is a node's part in the current epoch.
type Role uint8

// Roles. The String forms are part of the socket API.
const (
	Follower Role = iota
	Candidate
	Leader
	Observer
)

var roleNames = [...]string{"follower", "candidate", "leader", "observer"}

// String returns the API name of the role.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// HardState is the state a protocol needs to survive a crash. It is persisted
// before any message that depends on it is sent.
type HardState struct {
	// Term is the highest election term this node has seen (majority).
	Term uint64
	// Vote is the candidate this node voted for in Term, or None (majority).
	Vote ID
	// Epoch is the highest fencing epoch this node has seen or created. It
	// never goes back, across restarts too.
	Epoch uint64
	// Config is the newest voter configuration this node has persisted
	// (majority); zero for protocols without one and for state written
	// before configurations were replicated.
	Config Configuration
	// ConfigCommitted records that this node knows Config to be committed
	// (a removed voter then stays an observer across restarts).
	ConfigCommitted bool
}

// IsZero reports whether h is the state of a node that has never run.
func (h HardState) IsZero() bool { return h == HardState{} }

// SoftState is the volatile view of leadership a protocol announces when it
// changes. Leader is None while no leader is known.
type SoftState struct {
	Role   Role
	Leader ID
	Epoch  uint64
}

// Status is a protocol's answer to "who leads, right now?". It is computed
// at the instant of asking: Role is Leader only while this node holds a
// valid lease (majority) or believes itself coordinator (bully, ring).
type Status struct {
	Role   Role
	Leader ID
	// LeaderName is the leader's name when the protocol knows it.
	LeaderName string
	Epoch      uint64
	// LeaseUntil is the local time until which this node may act as leader
	// without asking anyone; zero when it does not lead or the protocol has
	// no lease.
	LeaseUntil Time
	// Term is the protocol's current term (majority) or epoch (others).
	Term uint64
	// Config is the newest voter configuration this node holds (majority),
	// committed or not; Committed the newest one it knows to be committed.
	// Config differs from Committed while a change is pending.
	Config    Configuration
	Committed Configuration
	// NoEligibleTarget is true on a leader that is itself ineligible
	// (Candidacy) but keeps leading because no eligible voter is reachable
	// to take over (docs/health.md).
	NoEligibleTarget bool
}

// Ready is the batch of work a protocol hands its driver. See the package
// documentation for the order in which it must be handled.
type Ready struct {
	// HardState, when non-nil, must be durable before any message is sent.
	HardState *HardState
	// Messages to send, in order.
	Messages []Message
	// SoftState, when non-nil, is a leadership change to announce.
	SoftState *SoftState
}

// IsEmpty reports whether rd holds no work.
func (rd Ready) IsEmpty() bool {
	return rd.HardState == nil && len(rd.Messages) == 0 && rd.SoftState == nil
}

// Logger is the logging a protocol may do. The agent adapts zap to it; tests
// and the simulator may discard or record lines. Arguments alternate key and
// value, as in zap's SugaredLogger.
type Logger interface {
	Debugw(msg string, keysAndValues ...any)
	Infow(msg string, keysAndValues ...any)
}

// NopLogger discards everything.
type NopLogger struct{}

// Debugw discards the line.
func (NopLogger) Debugw(string, ...any) {}

// Infow discards the line.
func (NopLogger) Infow(string, ...any) {}

// Errors returned by Step and Resign. They describe bad input; the protocol's
// state is unchanged when they are returned.
var (
	// ErrUnknownKind: the message kind is not one this protocol handles.
	ErrUnknownKind = errors.New("protocols: message kind not handled by this protocol")
	// ErrNotAddressed: the message is not addressed to this node.
	ErrNotAddressed = errors.New("protocols: message addressed to another node")
	// ErrUnknownSender: the message comes from a node this protocol does not
	// know as a member.
	ErrUnknownSender = errors.New("protocols: message from an unknown node")
	// ErrNotLeader: Resign was called on a node that does not lead.
	ErrNotLeader = errors.New("protocols: not the leader")
	// ErrNoTransferTarget: no eligible node can take leadership over.
	ErrNoTransferTarget = errors.New("protocols: no node to hand leadership to")
	// ErrChangeInFlight: a voter change was asked for while the leader's
	// newest configuration is not committed yet.
	ErrChangeInFlight = errors.New("protocols: a configuration change is already in flight")
	// ErrUnknownMember: the member named in a voter change is not known
	// (add) or not a voter (remove), or is already a voter (add).
	ErrUnknownMember = errors.New("protocols: unknown member")
	// ErrWouldLoseQuorum: after the change, fewer voters of the new set
	// than its majority would be reachable, or none would be left.
	ErrWouldLoseQuorum = errors.New("protocols: the change would lose the quorum")
)

// VoterChange is one voter change: exactly one of Add and Remove is set.
type VoterChange struct {
	Add    string
	Remove string
}

// VoterChanger is implemented by protocols whose voter set is replicated
// state (majority).
type VoterChanger interface {
	// ChangeVoters starts adding or removing one voter at local time now.
	// Only the leader accepts it; it returns ErrNotLeader,
	// ErrChangeInFlight, ErrUnknownMember or ErrWouldLoseQuorum (wrapped)
	// and changes nothing then. The change is committed when Status shows
	// it in Committed.
	ChangeVoters(now Time, c VoterChange) error
	// Problems returns the configuration conflicts this node has met, one
	// line each, oldest first (bounded).
	Problems() []string
}

// Candidacy is whether a node may take leadership, and how much it is
// preferred. The zero value — eligible, priority 0 — is what a node without
// health checks has and what a peer of an older version is assumed to have.
type Candidacy struct {
	// Ineligible is set while a health check fails or the node is in
	// maintenance: it does not put itself forward, but still votes and
	// follows.
	Ineligible bool
	// Priority orders eligible nodes: a leader hands over to a reachable,
	// eligible voter of higher priority that has been stable for a while
	// (majority), and bully and ring compare (priority, id) instead of id.
	Priority uint8
}

// Eligible reports whether the node may take leadership.
func (c Candidacy) Eligible() bool { return !c.Ineligible }

// CandidacySetter is implemented by protocols that gate leadership on the
// node's health. The driver calls SetCandidacy whenever the node's health
// or priority changes; it is an input like any other (see Deadliner).
type CandidacySetter interface {
	SetCandidacy(now Time, c Candidacy)
}

// ReachSetter is implemented by protocols that read the transport's view
// of a member beside the failure detector's: a detector suspects only a
// member that used to send to this node, so a member that dies before it
// ever sent anything stays live until gossip declares it dead, seconds
// later. The driver calls SetUnreached for a live member the transport
// fails to reach, and again with false once it reaches it; like every
// input it changes nothing but the protocol's state (see Deadliner). The
// driver may stop telling while the protocol knows a leader, so a
// protocol reads it only while it knows none.
type ReachSetter interface {
	SetUnreached(now Time, id ID, unreached bool)
}

// TransferCounts counts the leadership hand-overs a node started, by
// reason: an operator's Resign, its own failing health, a voter of higher
// priority.
type TransferCounts struct {
	Resign, Health, Priority uint64
}

// Protocol is the interface every election implements. All methods are
// called from a single goroutine; none may block, perform I/O, read a clock
// or start a goroutine.
type Protocol interface {
	// Step handles a message received from a peer at local time now.
	Step(now Time, m Message) error
	// Tick advances the protocol's notion of time; elapsed timeouts fire.
	// The driver calls it at a regular interval much shorter than the
	// protocol's timeouts.
	Tick(now Time)
	// MemberUp tells the protocol that m is a live member (new or returned).
	MemberUp(now Time, m Member)
	// MemberDown tells the protocol that the member with this id is dead or
	// has left (gossip's slower signal).
	MemberDown(now Time, id ID)
	// Suspect reports the local failure detector's verdict on a member:
	// suspected is true when phi crossed the threshold, false when the
	// member was heard again.
	Suspect(now Time, id ID, suspected bool)
	// Resign asks a leader to hand leadership over (where the protocol can)
	// or step down. It returns ErrNotLeader on a node that does not lead.
	Resign(now Time) error
	// Status answers who leads at local time now.
	Status(now Time) Status
	// HasReady reports whether Ready has work.
	HasReady() bool
	// Ready returns the pending work. It must be followed by Advance.
	Ready() Ready
	// Advance acknowledges that rd, as returned by the last Ready, was
	// handled in full.
	Advance(rd Ready)
}

// Deadliner is implemented by protocols that can say when their next timer
// is due, so the driver can sleep until then instead of ticking at a fixed
// rate: an idle agent then wakes for messages and due timers only, not a
// hundred times a second.
type Deadliner interface {
	// NextDeadline returns the earliest local time after now at which Tick
	// may act or Status(t) may differ from Status(now) (a lease running
	// out); a timer already due gives now. ok is false when no timer is
	// armed. It holds until the next input (Step, Tick, MemberUp,
	// MemberDown, Suspect, Resign, ConfirmLeadership).
	NextDeadline(now Time) (t Time, ok bool)
}

// Confirmer is implemented by protocols that can prove leadership with a
// fresh quorum round (majority), for callers that need more than the lease
// (Consul's consistent mode). The agent starts a round with
// ConfirmLeadership and polls Confirmed after every input until it is true,
// the node stops leading, or the caller's deadline passes.
type Confirmer interface {
	// ConfirmLeadership starts a quorum round at now and returns its token.
	// It returns ErrNotLeader when this node does not hold a valid lease.
	ConfirmLeadership(now Time) (token uint64, err error)
	// Confirmed reports whether a quorum acknowledged round token, or a
	// later one, in the term in which it was started, while this node still
	// leads.
	Confirmed(token uint64) bool
}

// HeartbeatAnswerer is implemented by protocols whose followers answer the
// leader's heartbeats (majority), so that a leader's failure detectors keep
// hearing every follower; the driver keeps watching them while it leads.
// In bully and ring only the leader sends, and a leader must not keep a
// detector that can never be fed (docs/design.md §3).
type HeartbeatAnswerer interface {
	// AnswersHeartbeats reports whether followers answer heartbeats.
	AnswersHeartbeats() bool
}
