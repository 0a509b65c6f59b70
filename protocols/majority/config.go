package majority

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Config configures a Node. Every duration is measured on the node's own
// monotonic clock.
type Config struct {
	// ID is this node's id; it must appear in Members.
	ID protocols.ID
	// Members are the nodes known at start, including this one. More arrive
	// through MemberUp.
	Members []protocols.Member
	// Voters are the names of the configured voters. Quorum is a majority of
	// this list, whoever gossip currently sees. A node whose name is not in
	// the list is an observer: it follows and never votes or campaigns.
	// The list only bootstraps a node whose HardState holds no
	// configuration; a persisted configuration wins over it (see
	// docs/voters.md).
	Voters []string
	// ElectionTimeout is the minimum election timeout. A follower that hears
	// no leader campaigns after a random timeout in [ElectionTimeout,
	// 2×ElectionTimeout), and a voter refuses votes for ElectionTimeout
	// after it last heard a live leader: that is what makes the lease safe.
	ElectionTimeout time.Duration
	// HeartbeatInterval is how often the leader asserts itself. It must be
	// well below ElectionTimeout.
	HeartbeatInterval time.Duration
	// PreVote makes a node check that it could win before it raises its
	// term, so a rejoining node does not disrupt a healthy leader.
	PreVote bool
	// CheckQuorum makes a leader step down when it has not heard from a
	// majority of voters within an election timeout.
	CheckQuorum bool
	// MaxClockDrift bounds the rate at which any two clocks may diverge,
	// as a fraction (0.01 = 1%). The lease is shortened to stay safe
	// within it.
	MaxClockDrift float64
	// Candidacy is the node's candidacy at start (see SetCandidacy); the
	// zero value is eligible with priority 0.
	Candidacy protocols.Candidacy
	// PreemptDelay is how long a reachable, eligible voter of higher
	// priority than the leader must have answered without a gap, and
	// without its candidacy changing, before the leader hands leadership
	// to it. It keeps a flapping preferred node from taking leadership
	// back and forth. Zero hands over at the first heartbeat answer.
	PreemptDelay time.Duration
	// HardState is the state restored from disk (zero for a fresh node).
	HardState protocols.HardState
	// Now is the local time at start.
	Now protocols.Time
	// Rand randomises election timeouts. Required.
	Rand *rand.Rand
	// Logger receives debug and info lines; nil discards them.
	Logger protocols.Logger
	// Unsafe switches on deliberately broken behaviour. It exists only so
	// the simulator's tests can show that the checker catches each bug; an
	// agent must never set it.
	Unsafe Unsafe
}

// Unsafe lists the deliberately broken variants used to prove the
// simulator's checker is real. Each one breaks a safety guarantee.
type Unsafe struct {
	// VoteNotPersisted leaves the vote out of the persisted HardState, so a
	// restarted node may vote twice in one term.
	VoteNotPersisted bool
	// QuorumOfGossipView counts a majority of the voters gossip currently
	// sees alive instead of the configured voters.
	QuorumOfGossipView bool
	// IgnoreLease makes voters grant votes while they still hear a live
	// leader, so a new leader can be elected while the old lease runs.
	IgnoreLease bool
	// VoteForOlderConfig makes voters grant (pre-)votes to candidates whose
	// configuration is older than their own (no up-to-date check).
	VoteForOlderConfig bool
	// ChangeBeforeInheritedCommit makes a new leader treat the
	// configuration it inherited as committed and accept a change at once,
	// without first committing it in its own term (Raft's 2015 bug).
	ChangeBeforeInheritedCommit bool
	// IneligibleCampaigns lets a node campaign, and keep campaigning,
	// while its Candidacy says it is ineligible (a failing agent may
	// campaign).
	IneligibleCampaigns bool
	// RestartForgetsLease lets a restarted sole voter campaign at once,
	// forgetting a lease it may have granted just before the crash (the
	// rule the restart wait replaced).
	RestartForgetsLease bool
	// IgnoreHeldConfig turns off learning that a configuration is
	// committed from a majority of its voters holding it (noteConfigHeld):
	// a member left out of the voters keeps campaigning until a leader's
	// heartbeat tells it. With RestartForgetsLease it is the code before
	// both rules.
	IgnoreHeldConfig bool
	// LeaseTooLong makes a leader count its lease for three election
	// timeouts after a confirmed round instead of ET·(1−ρ)/(1+ρ), so it
	// keeps reporting a valid lease after voters may have elected another.
	LeaseTooLong bool
}

// validate reports every problem with c at once.
func (c Config) validate() error {
	var errs []error
	if c.ID == protocols.None {
		errs = append(errs, errors.New("id must be non-zero"))
	}
	if c.ElectionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("election timeout %v must be positive", c.ElectionTimeout))
	}
	if c.HeartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat interval %v must be positive", c.HeartbeatInterval))
	} else if c.ElectionTimeout > 0 && c.HeartbeatInterval*2 > c.ElectionTimeout {
		errs = append(errs, fmt.Errorf("heartbeat interval %v must be at most half the election timeout %v", c.HeartbeatInterval, c.ElectionTimeout))
	}
	if c.PreemptDelay < 0 {
		errs = append(errs, fmt.Errorf("preempt delay %v must not be negative", c.PreemptDelay))
	}
	if c.MaxClockDrift < 0 || c.MaxClockDrift >= 0.5 {
		errs = append(errs, fmt.Errorf("max clock drift %v must be in [0, 0.5)", c.MaxClockDrift))
	}
	if err := protocols.CheckHardState(c.HardState); err != nil {
		errs = append(errs, fmt.Errorf("hard state: %w", err))
	}
	if c.Rand == nil {
		errs = append(errs, errors.New("rand must be set"))
	}
	if len(c.Voters) == 0 && c.HardState.Config.IsZero() {
		errs = append(errs, errors.New("at least one voter must be configured"))
	}
	seenVoter := make(map[string]bool, len(c.Voters))
	for _, v := range c.Voters {
		if v == "" {
			errs = append(errs, errors.New("voter name must not be empty"))
		} else if seenVoter[v] {
			errs = append(errs, fmt.Errorf("voter %q listed twice", v))
		}
		seenVoter[v] = true
	}
	self := false
	seenID := make(map[protocols.ID]bool, len(c.Members))
	seenName := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		if m.ID == protocols.None || m.Name == "" {
			errs = append(errs, fmt.Errorf("member %+v needs a non-zero id and a name", m))
			continue
		}
		if seenID[m.ID] || seenName[m.Name] {
			errs = append(errs, fmt.Errorf("member %d (%s) listed twice", m.ID, m.Name))
		}
		seenID[m.ID], seenName[m.Name] = true, true
		if m.ID == c.ID {
			self = true
		}
	}
	if !self {
		errs = append(errs, fmt.Errorf("members must include this node (id %d)", c.ID))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("majority: invalid config: %w", err)
	}
	return nil
}
