// Package highest holds what bully and ring, the two highest-rank
// elections (rank: priority, then id), keep alike: the members with their
// priorities and the liveness verdicts on each, the resign machinery
// (abstention), the preempt_delay clock (Stability), the highest epoch
// seen, the follower timeout and the checks of their configuration and
// input. Each protocol keeps its own algorithm; this package keeps one
// copy of the bookkeeping around it.
//
// Like protocols it is pure: no goroutines, I/O, clock reads or global
// randomness.
package highest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// MaxID is the largest node id the highest-id elections accept: ids occupy
// the low bits of every epoch (protocols.NextEpoch), which keeps two leaders
// from ever sharing one.
const MaxID = protocols.MaxEpochID

// Defaults taken by zero durations: the agent's own (config.Default, and
// phi.DefaultHeartbeatInterval; config's tests hold them equal), so that the
// library left unconfigured behaves as the agent does. Not imported from
// phi: protocols import nothing but the standard library and protocols.
const (
	DefaultHeartbeatInterval = 50 * time.Millisecond
	DefaultElectionTimeout   = 200 * time.Millisecond
)

// Durations applies the defaults to zero durations.
func Durations(hb, et time.Duration) (time.Duration, time.Duration) {
	if hb == 0 {
		hb = DefaultHeartbeatInterval
	}
	if et == 0 {
		et = DefaultElectionTimeout
	}
	return hb, et
}

// CheckConfig reports the problems of the configuration both protocols
// share, each prefixed with the protocol's name.
func CheckConfig(name string, id protocols.ID, members []protocols.Member, hs protocols.HardState, hbSet, etSet time.Duration) []error {
	var errs []error
	for _, e := range protocols.CheckEpochIDs(id, members) {
		errs = append(errs, fmt.Errorf("%s: %w", name, e))
	}
	if err := protocols.CheckHardState(hs); err != nil {
		errs = append(errs, fmt.Errorf("%s: hard state: %w", name, err))
	}
	hb, et := Durations(hbSet, etSet)
	if hbSet < 0 || etSet < 0 {
		errs = append(errs, fmt.Errorf("%s: durations must not be negative", name))
	} else if et <= hb {
		errs = append(errs, fmt.Errorf("%s: election timeout %v must exceed heartbeat interval %v", name, et, hb))
	}
	return errs
}

// Rand returns rng, or when nil a generator seeded from id and the
// protocol's own stream, so that runs stay deterministic.
func Rand(rng *rand.Rand, id protocols.ID, stream uint64) *rand.Rand {
	if rng != nil {
		return rng
	}
	return rand.New(rand.NewPCG(uint64(id), stream))
}

// Timeout is now plus et plus up to half of it in random jitter: how long
// a follower waits for its leader, and a ring participant for its round.
func Timeout(rng *rand.Rand, now protocols.Time, et time.Duration) protocols.Time {
	jitter := time.Duration(rng.Int64N(int64(et)/2 + 1))
	return now.Add(et + jitter)
}

// ErrInvalidID is MemberUp's complaint about a member whose id is zero or
// above MaxID.
var ErrInvalidID = errors.New("invalid member id")

type member struct {
	m         protocols.Member
	down      bool // MemberDown without a later MemberUp
	suspected bool // the failure detector's latest verdict
}

// Roster is every member a node has heard of, itself included, sorted by
// id, with the two verdicts on each: down (gossip) and suspected (the
// failure detector). A member is live when neither holds. Each member's
// priority (protocols.Member.Priority, from gossip, refreshed by the
// Priority its own messages carry) ranks it: Above compares (priority, id).
type Roster struct {
	// IDsOnly is the planted bug Unsafe.IDsOnly: Above compares ids only.
	IDsOnly bool

	self    protocols.ID
	members map[protocols.ID]*member
	ids     []protocols.ID
}

// NewRoster returns the roster of self and members.
func NewRoster(self protocols.ID, members []protocols.Member) *Roster {
	r := &Roster{self: self, members: map[protocols.ID]*member{}}
	for _, m := range members {
		r.Add(m)
	}
	r.Add(protocols.Member{ID: self})
	return r
}

// Add records m if it is new and reports whether it was; a known member's
// name and priority are updated when m carries a name.
func (r *Roster) Add(m protocols.Member) bool {
	if mm, ok := r.members[m.ID]; ok {
		if m.Name != "" {
			mm.m = m
		}
		return false
	}
	r.members[m.ID] = &member{m: m}
	r.ids = append(r.ids, m.ID)
	slices.Sort(r.ids)
	return true
}

// IDs returns every member id, sorted; the caller must not change it.
func (r *Roster) IDs() []protocols.ID { return r.ids }

// Known reports whether id is a member.
func (r *Roster) Known(id protocols.ID) bool {
	_, ok := r.members[id]
	return ok
}

// Priority is id's priority as last learned; 0 for an unknown id.
func (r *Roster) Priority(id protocols.ID) uint8 {
	if m, ok := r.members[id]; ok {
		return m.m.Priority
	}
	return 0
}

// SetPriority records id's priority: this node's own from its candidacy,
// another's from the Priority its messages carry. It reports whether it
// changed; an unknown id is ignored.
func (r *Roster) SetPriority(id protocols.ID, p uint8) bool {
	m, ok := r.members[id]
	if !ok || m.m.Priority == p {
		return false
	}
	m.m.Priority = p
	return true
}

// Above reports whether a outranks b: a higher priority, or the same
// priority and a higher id. Ids are unique, so two members never tie.
func (r *Roster) Above(a, b protocols.ID) bool {
	pa, pb := r.Priority(a), r.Priority(b)
	if pa != pb && !r.IDsOnly {
		return pa > pb
	}
	return a > b
}

// Highest returns the live member of highest rank other than self and
// except, or None when there is none.
func (r *Roster) Highest(except protocols.ID) protocols.ID {
	best := protocols.None
	for _, id := range r.ids {
		if id != r.self && id != except && r.Live(id) && (best == protocols.None || r.Above(id, best)) {
			best = id
		}
	}
	return best
}

// Live reports whether id is a member believed alive: neither down nor
// suspected.
func (r *Roster) Live(id protocols.ID) bool {
	m, ok := r.members[id]
	return ok && !m.down && !m.suspected
}

// Down reports whether id is a member gossip reported down.
func (r *Roster) Down(id protocols.ID) bool {
	m, ok := r.members[id]
	return ok && m.down
}

// Name returns id's member name, or "" when unknown.
func (r *Roster) Name(id protocols.ID) string {
	if m, ok := r.members[id]; ok {
		return m.m.Name
	}
	return ""
}

// Up records m as live, adding it when new, with the priority m carries
// (this node's own is its candidacy's, which Up leaves alone). It refuses
// (ErrInvalidID) an id that is zero or above MaxID, changing nothing.
func (r *Roster) Up(m protocols.Member) error {
	if m.ID == protocols.None || m.ID > MaxID {
		return ErrInvalidID
	}
	if m.ID == r.self {
		m.Priority = r.Priority(r.self)
	}
	r.Add(m)
	mm := r.members[m.ID]
	mm.m.Priority = m.Priority
	mm.down, mm.suspected = false, false
	return nil
}

// SetDown records gossip's verdict that id is dead. It reports false, and
// changes nothing, for an unknown id or this node itself.
func (r *Roster) SetDown(id protocols.ID) bool {
	m, ok := r.members[id]
	if !ok || id == r.self {
		return false
	}
	m.down = true
	return true
}

// SetSuspected records the failure detector's verdict on id. It reports
// false, and changes nothing, for an unknown id or this node itself.
func (r *Roster) SetSuspected(id protocols.ID, suspected bool) bool {
	m, ok := r.members[id]
	if !ok || id == r.self {
		return false
	}
	m.suspected = suspected
	return true
}

// Addressed checks that m is for this node and from another member, the
// first checks of every Step.
func (r *Roster) Addressed(m protocols.Message) error {
	if m.To != r.self {
		return protocols.ErrNotAddressed
	}
	if !r.Known(m.From) || m.From == r.self {
		return protocols.ErrUnknownSender
	}
	return nil
}

// Status is the status of a node in role following leader in epoch.
// Neither protocol has a lease: LeaseUntil is always zero and Term is the
// epoch.
func (r *Roster) Status(role protocols.Role, leader protocols.ID, epoch uint64) protocols.Status {
	return protocols.Status{Role: role, Leader: leader, Epoch: epoch, Term: epoch, LeaderName: r.Name(leader)}
}

// Epochs tracks the highest epoch a node has seen or created, which every
// new epoch must exceed, and the durable state that persists it.
type Epochs struct {
	seen uint64
	hs   protocols.HardState
}

// NewEpochs starts from the durable state of the last run.
func NewEpochs(hs protocols.HardState) Epochs { return Epochs{seen: hs.Epoch, hs: hs} }

// Seen is the highest epoch seen or created.
func (e *Epochs) Seen() uint64 { return e.seen }

// HardState is the state to persist: it rises with Observe.
func (e *Epochs) HardState() protocols.HardState { return e.hs }

// Observe raises the highest epoch seen; it is persisted with the next
// Ready.
func (e *Epochs) Observe(v uint64) {
	if v > e.seen {
		e.seen = v
		e.hs.Epoch = v
	}
}

// Admit refuses, with the protocol's name, a message whose epoch is
// implausibly far beyond the highest seen (protocols.AdmitEpoch).
func (e *Epochs) Admit(name string, m protocols.Message) error {
	if !protocols.AdmitEpoch(m.Epoch, e.seen) {
		return fmt.Errorf("%s: %w", name, protocols.BeyondCeiling("epoch", m, m.Epoch, e.seen))
	}
	return nil
}

// Abstention is the resign machinery. A leader that resigns abstains — it
// competes in no election — until a new leader is announced or two election
// timeouts pass; the leader that replaced it while it abstained is then
// spared: the resigned node, though its id is higher, does not preempt it
// until it takes part in an election again.
type Abstention struct {
	until   protocols.Time
	yieldTo protocols.ID
	// forgiven: the node spares no one after this abstention (Forgive).
	forgiven bool
}

// Begin starts abstaining at now and returns when the abstention ends.
func (a *Abstention) Begin(now protocols.Time, et time.Duration) protocols.Time {
	a.until = now.Add(2 * et)
	a.forgiven = false
	return a.until
}

// Forgive ends the sparing, now and after the abstention in progress,
// which still runs to its end: a node that resigned because it turned
// ineligible, and is eligible again, stays out of the round it opened but
// does not spare the leader that replaced it — it takes over once stable
// for its preempt delay if it ranks higher.
func (a *Abstention) Forgive() {
	a.yieldTo = protocols.None
	a.forgiven = true
}

// Active reports whether the node abstains at now.
func (a *Abstention) Active(now protocols.Time) bool { return now < a.until }

// Followed records that a node follows leader at now; lower tells that
// leader ranks below the node. A lower leader that replaced it while it
// abstained is spared from now on, and the abstention ends.
func (a *Abstention) Followed(now protocols.Time, lower bool, leader protocols.ID) {
	if a.Active(now) && lower && !a.forgiven {
		a.yieldTo = leader
	}
	a.until = 0
}

// Campaigning records that the node takes part in an election: it spares
// nobody any more.
func (a *Abstention) Campaigning() { a.yieldTo = protocols.None }

// Led records that the node became leader: the abstention, and whoever it
// spared, are over.
func (a *Abstention) Led() { a.until, a.yieldTo = 0, protocols.None }

// Spares reports whether the node must leave a lower leader be at now:
// while it abstains, and when leader is the one that replaced it.
func (a *Abstention) Spares(now protocols.Time, leader protocols.ID) bool {
	return leader == a.yieldTo || a.Active(now)
}

// SetCandidacy does what bully and ring do alike with node self's new
// candidacy c: its priority goes into the roster, and on turning eligible
// its preempt delay starts over and it no longer spares the leader that
// replaced it when it resigned on turning ineligible — once stable it
// takes leadership back if it ranks higher. It reports whether the
// priority and whether the eligibility changed; the protocol logs, and on
// turning ineligible leaves what it was doing in its own way.
func SetCandidacy(now protocols.Time, c protocols.Candidacy, self protocols.ID, r *Roster,
	ineligible *bool, s *Stability, a *Abstention) (priorityChanged, eligibilityChanged bool) {
	priorityChanged = r.SetPriority(self, c.Priority)
	if c.Ineligible == *ineligible {
		return priorityChanged, false
	}
	*ineligible = c.Ineligible
	if !c.Ineligible {
		s.Restart(now)
		a.Forgive()
	}
	return priorityChanged, true
}

// Stability is the preempt_delay clock (docs/bully-ring.md): how long this
// node has been up and eligible. It lives in the node that would take
// over, because only that node knows when it started and when it last
// turned eligible, without trusting another node's clock or gossip's
// timing; a node that restarts, or turns eligible again, starts over.
// While it is not stable it follows a lower-ranked leader instead of
// preempting it, so a flapping preferred node never takes leadership
// from a healthy leader. Elections that run anyway (the leader lost) are
// not delayed: the highest-ranked live member wins them.
type Stability struct {
	delay time.Duration
	since protocols.Time
}

// NewStability starts the clock at now.
func NewStability(delay time.Duration, now protocols.Time) Stability {
	return Stability{delay: delay, since: now}
}

// Restart starts the clock over at now (the node turned eligible).
func (s *Stability) Restart(now protocols.Time) { s.since = now }

// At is when the node becomes stable.
func (s Stability) At() protocols.Time { return s.since.Add(s.delay) }

// Stable reports whether the node has been up and eligible for the delay
// at now.
func (s Stability) Stable(now protocols.Time) bool { return now >= s.At() }

// Delay is the preempt delay.
func (s Stability) Delay() time.Duration { return s.delay }

// WaitsForLeader reports whether a follower self that has heard of no
// leader should wait longer rather than start an election: it is not yet
// stable (it may be a preferred node just restarted while a lower-ranked
// leader leads, whose heartbeats reach it once gossip tells that leader
// it is back), and a live member ranked below it will start an election
// if no leader exists, which self, ranking higher, then wins. An election
// so delayed — every member below self ineligible — waits at most the
// preempt delay.
func WaitsForLeader(r *Roster, self protocols.ID, s Stability, now protocols.Time) bool {
	return WaitsForLeaderReached(r, self, s, now, nil)
}

// WaitsForLeaderReached is WaitsForLeader counting only the members below
// self that unreached does not name (nil names none): a member the
// transport fails to reach will not start the election. Without it a
// seed killed before any election, and so before anyone heartbeated it
// or watched it, kept every member above it waiting until gossip
// declared it dead or the preempt delay ran out: 5 s at the defaults
// (docs/multihost.md, "The split's tail").
func WaitsForLeaderReached(r *Roster, self protocols.ID, s Stability, now protocols.Time, unreached map[protocols.ID]bool) bool {
	if s.Stable(now) {
		return false
	}
	for _, id := range r.ids {
		if id != self && r.Live(id) && r.Above(self, id) && !unreached[id] {
			return true
		}
	}
	return false
}
