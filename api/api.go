// Package api holds the wire types and constants of the agent's local socket
// API, shared by the server (localapi/) and the Go client (client/) so the
// two can never disagree about a path or a field name.
//
// The JSON field names, paths and query parameters are a user-facing
// contract (docs/design.md §6): curl users and other languages depend on them. Only
// add to them.
//
// This package must never import anything but the standard library, and
// must never do I/O beyond reading the environment in DefaultSocketPath:
// every local process that links the client links it.
package api

import (
	"encoding/json"
	"os"
	"strings"
	"time"
)

// Paths of the socket API. All answer JSON except PathWatch (NDJSON) and
// PathMetrics (Prometheus text).
const (
	// PathStatus: GET → Status. With ParamConsistent the agent confirms its
	// leadership with a quorum first (majority only).
	PathStatus = "/v1/status"
	// PathLeader: GET → Leader. With ParamIndex it blocks until the epoch
	// exceeds the index or ParamWait elapses (Consul blocking query).
	PathLeader = "/v1/leader"
	// PathWatch: GET → NDJSON stream of Status, the current one first.
	PathWatch = "/v1/watch"
	// PathMembers: GET → []Member.
	PathMembers = "/v1/members"
	// PathResign: POST → 200 Resigned once the leader has started handing
	// over; 409 with Error when this node does not lead; 403 when the
	// caller is neither the agent's own user nor root (reads stay open to
	// whoever may open the socket).
	PathResign = "/v1/resign"
	// PathHealth: GET → 200 Health while the agent runs its loop.
	PathHealth = "/v1/health"
	// PathMetrics: GET → Prometheus text exposition.
	PathMetrics = "/metrics"
	// PathVoters: GET → Voters (majority). POST with a VoterChange body →
	// Voters once the change is committed; 409 with Error when it is
	// refused (a change in flight, an unknown member, the quorum would be
	// lost), 503 when no leader can take it, 400 for a protocol without
	// voters; 403 like PathResign. Any agent takes it: a follower or an
	// observer forwards it to the leader.
	PathVoters = "/v1/voters"
	// PathKeys: GET → Keys, this agent's installed cluster keys. POST
	// with a KeyChange body → Keys after the change, saved. Both need
	// write permission (403 like PathResign): the answer holds the keys.
	PathKeys = "/v1/keys"
	// PathClusterKeys: GET → KeyReport of every member's installed keys.
	// POST with a ClusterKeyChange body → KeyReport of one rotation step
	// run on every member through gossip; 409 with Error when it is
	// refused before any member changes (a member lacks the key to use,
	// or uses the key to remove). Write permission like PathKeys.
	PathClusterKeys = "/v1/keys/cluster"
)

// Query parameters.
const (
	// ParamIndex is the epoch a blocking /v1/leader request has seen; the
	// answer comes when the epoch is greater (decimal uint64).
	ParamIndex = "index"
	// ParamWait bounds a blocking request, as a Go duration ("30s").
	// Absent: DefaultWait. Larger than MaxWait: MaxWait.
	ParamWait = "wait"
	// ParamConsistent, present on /v1/status (any value but "false"), asks
	// for a leadership check with a quorum before answering.
	ParamConsistent = "consistent"
)

// Blocking query bounds.
const (
	// DefaultWait is the wait of a blocking /v1/leader without ParamWait.
	DefaultWait = 5 * time.Minute
	// MaxWait caps ParamWait, so a forgotten client cannot hold a request
	// open forever.
	MaxWait = 5 * time.Minute
)

// Content types.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
)

// Host is the HTTP host name clients use on the socket (the socket path,
// not the host, selects the agent): curl --unix-socket S http://agent/v1/status.
const Host = "agent"

// Roles, the values of Status.Role.
const (
	RoleLeader    = "leader"
	RoleFollower  = "follower"
	RoleCandidate = "candidate"
	RoleObserver  = "observer"
)

// Member states, the values of Member.State.
const (
	StateAlive   = "alive"
	StateSuspect = "suspect"
	StateDead    = "dead"
	StateLeft    = "left"
)

// Status is this agent's view of one election at one instant.
type Status struct {
	// Election names the election this status is of (DefaultElection for
	// the unprefixed paths); absent from agents before named elections,
	// which ran only DefaultElection.
	Election string `json:"election,omitempty"`
	// Node is this agent's name.
	Node string `json:"node"`
	// ID is this agent's numeric id.
	ID uint64 `json:"id"`
	// Protocol is "majority", "bully" or "ring".
	Protocol string `json:"protocol"`
	// Role is RoleLeader, RoleFollower, RoleCandidate or RoleObserver.
	// RoleLeader means this node leads *now*: in majority, with a valid
	// lease.
	Role string `json:"role"`
	// Leader is the leader's node name, or "" while none is known.
	Leader string `json:"leader"`
	// Epoch is the fencing token of the current (or last known) leadership.
	// It never decreases.
	Epoch uint64 `json:"epoch"`
	// LeaseMS is how many milliseconds this node's leader lease has left
	// (majority); 0 when it does not lead or the protocol has no lease.
	LeaseMS int64 `json:"lease_ms"`
	// LeaseNS is the same in nanoseconds, so a lease with less than a
	// millisecond left is not read as none: it is above zero whenever this
	// node leads with a lease. Absent (zero) from agents before it.
	LeaseNS int64 `json:"lease_ns,omitempty"`
	// Seq numbers the leadership views (role, leader, epoch) this agent
	// process has announced: a status answer carries the current one, each
	// watch event its own. A client that merges polls with the watch stream
	// keeps the answer with the highest Seq, so an answer computed before a
	// change never overrides the change. It restarts with the agent; zero
	// from agents before it.
	Seq uint64 `json:"seq,omitempty"`
	// Members is the number of live members this agent knows, itself
	// included (the list is PathMembers).
	Members int `json:"members"`
	// Quorum describes the voters (majority).
	Quorum Quorum `json:"quorum"`
	// GossipAddr is the host:port this agent publishes to gossip, the
	// address peers reach it on.
	GossipAddr string `json:"gossip_addr,omitempty"`
	// TransportAddr is the libp2p multiaddr (with /p2p/<peer id>) this
	// agent publishes for election messages.
	TransportAddr string `json:"transport_addr,omitempty"`
	// LeaderAgeMS is, on an observer, how many milliseconds old its
	// knowledge of Leader and Epoch is: observers are not heartbeated by
	// the leader but learn it by gossip, and report what they learned and
	// when the leader said it, never more. 0 on voters and candidates,
	// which hear the leader directly, and while no leader is known.
	LeaderAgeMS int64 `json:"leader_age_ms"`
	// LeaderMeta is the leader's node.meta (its service address, say), when
	// a leader is known and publishes one.
	LeaderMeta Meta `json:"leader_meta,omitzero"`
	// Health is this agent's fitness to lead (checks, maintenance); absent
	// from agents before it.
	Health *HealthReport `json:"health,omitempty"`
	// Problems lists what this agent found wrong with the cluster's
	// agreement, one sentence each: another member holding a different
	// voter list or settings at the same configuration index
	// (docs/voters.md). Absent when there are none. On the wire it is a
	// list of strings; in Go a Problems value, so that Status stays
	// comparable.
	Problems Problems `json:"problems,omitempty"`
}

// Problems is a list of one-line sentences, kept as one string (the lines
// joined by newlines) so that a Status can still be compared with ==. It
// travels as a JSON list of strings.
type Problems string

// NewProblems joins lines into a Problems value. Newlines inside a line
// become spaces.
func NewProblems(lines []string) Problems {
	clean := make([]string, 0, len(lines))
	for _, l := range lines {
		clean = append(clean, strings.ReplaceAll(l, "\n", " "))
	}
	return Problems(strings.Join(clean, "\n"))
}

// List returns the sentences, nil when there are none.
func (p Problems) List() []string {
	if p == "" {
		return nil
	}
	return strings.Split(string(p), "\n")
}

// MarshalJSON writes p as a list of strings.
func (p Problems) MarshalJSON() ([]byte, error) {
	l := p.List()
	if l == nil {
		l = []string{}
	}
	return json.Marshal(l)
}

// UnmarshalJSON reads a list of strings.
func (p *Problems) UnmarshalJSON(b []byte) error {
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*p = NewProblems(l)
	return nil
}

// Lease returns how long this node's leader lease has left at the time of
// the answer, from LeaseNS or, from older agents, LeaseMS; zero when it has
// none.
func (s Status) Lease() time.Duration {
	if s.LeaseNS > 0 {
		return time.Duration(s.LeaseNS)
	}
	return time.Duration(s.LeaseMS) * time.Millisecond
}

// IsLeader reports whether s says this node leads.
func (s Status) IsLeader() bool { return s.Role == RoleLeader }

// LeaderInfo returns the Leader view of s.
func (s Status) LeaderInfo() Leader {
	return Leader{Leader: s.Leader, Epoch: s.Epoch, IsSelf: s.Role == RoleLeader, LeaderMeta: s.LeaderMeta}
}

// Quorum describes the configured voters. In bully and ring, which have no
// voters, Voters and Reachable count the live members and Healthy reports
// whether a leader is known.
type Quorum struct {
	// Voters is the number of configured voters.
	Voters int `json:"voters"`
	// Reachable is how many voters this node currently reaches, itself
	// included: voters its election transport heard from (a message, or
	// an answer to a probe) within about two seconds. Gossip listing a
	// voter as alive is not enough.
	Reachable int `json:"reachable"`
	// Healthy is true while Reachable is a majority of Voters.
	Healthy bool `json:"healthy"`
}

// Leader answers "who leads?".
type Leader struct {
	// Leader is the leader's node name, or "".
	Leader string `json:"leader"`
	// Epoch is the leadership's fencing token.
	Epoch uint64 `json:"epoch"`
	// IsSelf is true when the answering agent is the leader.
	IsSelf bool `json:"is_self"`
	// LeaderMeta is the leader's node.meta, as in Status.
	LeaderMeta Meta `json:"leader_meta,omitzero"`
}

// Member is one node as this agent sees it.
type Member struct {
	// Name is the node's name.
	Name string `json:"name"`
	// ID is the node's numeric id.
	ID uint64 `json:"id"`
	// Addr is the node's gossip host:port.
	Addr string `json:"addr"`
	// State is StateAlive, StateSuspect, StateDead or StateLeft.
	State string `json:"state"`
	// Phi is the failure detector's current suspicion of the node (0 for
	// this agent itself and for nodes without samples). JSON has no
	// infinity, so the server caps it at MaxPhi.
	Phi float64 `json:"phi"`
	// Heartbeats summarises the gaps between the node's heartbeats as
	// this agent received them; absent before two arrived in a row.
	// Gaps count only while this agent watched the node, so a node that
	// was down is not taken for one that paused.
	Heartbeats *HeartbeatStats `json:"heartbeats,omitempty"`
}

// HeartbeatStats is the heartbeat inter-arrival distribution of one
// member: percentiles to 10 % resolution (reported as the bound below
// which that share fell) and the longest gap seen, in milliseconds.
type HeartbeatStats struct {
	Samples  uint64  `json:"samples"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxGapMs float64 `json:"max_gap_ms"`
}

// MaxPhi is the largest Member.Phi on the wire.
const MaxPhi = 1e9

// Health is the body of a 200 answer from PathHealth.
type Health struct {
	// Status is "ok".
	Status string `json:"status"`
}

// Resigned is the body of a 200 answer from PathResign.
type Resigned struct {
	// Resigned is true.
	Resigned bool `json:"resigned"`
}

// Voters is the voter configuration of a majority cluster as one agent
// holds it (PathVoters).
type Voters struct {
	// Index counts configurations; it only grows.
	Index uint64 `json:"index"`
	// Term is the term of the leader that proposed the configuration.
	Term uint64 `json:"term"`
	// Voters is the committed voter set, sorted.
	Voters []string `json:"voters"`
	// Pending is a newer configuration this agent holds that is not known
	// to be committed yet, or nil.
	Pending *PendingVoters `json:"pending"`
	// Leader is the leader that took a change (POST), or this agent's
	// view of it (GET); "" when none is known.
	Leader string `json:"leader,omitempty"`
}

// PendingVoters is a configuration proposed but not known to be committed.
type PendingVoters struct {
	Index  uint64   `json:"index"`
	Term   uint64   `json:"term"`
	Voters []string `json:"voters"`
}

// VoterChange is the body of a POST to PathVoters: exactly one of Add and
// Remove names a member.
type VoterChange struct {
	Add    string `json:"add,omitempty"`
	Remove string `json:"remove,omitempty"`
}

// Key operations of a KeyChange.
const (
	KeyInstall = "install"
	KeyUse     = "use"
	KeyRemove  = "remove"
)

// KeyChange is the body of a POST to PathKeys: Op is KeyInstall, KeyUse or
// KeyRemove, Key a cluster key in standard base64. Each is idempotent.
type KeyChange struct {
	Op  string `json:"op"`
	Key string `json:"key"`
}

// Keys are an agent's installed cluster keys, in standard base64, with
// a short fingerprint of each for logs.
type Keys struct {
	Primary   string   `json:"primary"`
	Installed []string `json:"installed"`
}

// ClusterKeyChange is the body of a POST to PathClusterKeys: KeyChange's
// Op and Key for every member. Force runs a use or remove although some
// member did not confirm it is ready (down, no answer, or, for use, lacks
// the key); a remove of a key some member uses is refused even so.
type ClusterKeyChange struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Force bool   `json:"force,omitempty"`
}

// KeyReport is what every member said to one cluster-wide key step, as
// Consul's keyring prints it: Acked of Members acknowledged. Members
// counts every member not known to have left, this agent included; those
// down or silent are in Failed with the reason. Keys are the keys the
// members that answered hold after the step.
type KeyReport struct {
	Op          string       `json:"op"`
	Fingerprint string       `json:"fingerprint,omitempty"`
	Members     int          `json:"members"`
	Acked       int          `json:"acked"`
	Failed      []KeyFailure `json:"failed"`
	Keys        []KeyCount   `json:"keys"`
}

// KeyFailure is a member that did not acknowledge a key step, and why.
type KeyFailure struct {
	Member string `json:"member"`
	Error  string `json:"error"`
}

// KeyCount is one key of a KeyReport: on how many members it is
// installed, and on how many it is the primary.
type KeyCount struct {
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	Installed   int    `json:"installed"`
	Primary     int    `json:"primary"`
}

// Error is the body of every non-2xx answer, and may be the last line of a
// watch stream (the server then closes it, e.g. because the watcher lagged).
type Error struct {
	Error string `json:"error"`
}

// WatchLine decodes one line of a PathWatch stream: a Status or, when Error
// is not empty, the final error line.
type WatchLine struct {
	Status
	Error string `json:"error,omitempty"`
}

// EnvSocket names the environment variable that overrides the default
// socket path for clients.
const EnvSocket = "CONCLAVE_SOCKET"

// DefaultSocket is the socket of config.example.toml's node n1, relative to
// the working directory: "agent run -config config.example.toml" and
// "agent status" run from the same directory find each other without flags.
const DefaultSocket = "data/n1/agent.sock"

// DefaultSocketPath returns $CONCLAVE_SOCKET when set and not empty, else
// DefaultSocket. Clients use it when given no socket path.
func DefaultSocketPath() string {
	if s := os.Getenv(EnvSocket); s != "" {
		return s
	}
	return DefaultSocket
}
