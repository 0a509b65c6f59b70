package ring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/highest"
)

// MaxID is the largest node id ring accepts: ids occupy the low bits of
// every epoch (protocols.NextEpoch), which keeps two leaders from ever
// sharing one.
const MaxID = highest.MaxID

// Algorithm names accepted in Config.Algorithm.
const (
	AlgLCR      = "lcr"
	AlgHS       = "hs"
	AlgPeterson = "peterson"
)

// Defaults taken by zero Config durations: the agent's own, a 50 ms
// heartbeat and a 200 ms election timeout.
const (
	DefaultHeartbeatInterval = highest.DefaultHeartbeatInterval
	DefaultElectionTimeout   = highest.DefaultElectionTimeout
)

// Config configures a Node.
type Config struct {
	// ID is this node's id: unique, non-zero and at most MaxID. Among
	// members of equal priority (Candidacy.Priority) higher ids win
	// elections.
	ID protocols.ID
	// Members lists the cluster, this node included (it is added when
	// missing); the ring orders them by id. Ids must be unique, non-zero
	// and at most MaxID.
	Members []protocols.Member
	// HeartbeatInterval is how often the leader heartbeats every member.
	// Zero means DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// ElectionTimeout (plus up to half of it in random jitter) is how long a
	// participant waits for the LEADER announcement before it restarts a
	// stalled election, and how long a follower waits for a heartbeat before
	// it starts one. It should cover a message's trip around the ring and
	// must exceed HeartbeatInterval. Zero means DefaultElectionTimeout.
	ElectionTimeout time.Duration
	// Algorithm selects the election: AlgLCR (Chang-Roberts, the default
	// when empty), AlgHS (Hirschberg-Sinclair) or AlgPeterson (Peterson /
	// Dolev-Klawe-Rodeh). Every member must use the same one.
	Algorithm string
	// Candidacy is the node's candidacy at start: an ineligible node
	// abstains until SetCandidacy says otherwise, and Priority ranks it,
	// with its id, against the other members (whose priorities come with
	// them in Members and MemberUp).
	Candidacy protocols.Candidacy
	// PreemptDelay is how long this node must have been up and eligible
	// before it takes leadership from a lower-ranked leader that is alive
	// (docs/bully-ring.md); until then it follows that leader. Zero
	// preempts at once. Elections held because no leader is alive are
	// never delayed.
	PreemptDelay time.Duration
	// HardState is the state persisted by the last run (zero on first
	// start); only Epoch is used, Term and Vote pass through unchanged.
	HardState protocols.HardState
	// Now is the local clock at creation.
	Now protocols.Time
	// Rand jitters the timeouts. Nil means a generator seeded from ID, so
	// that runs stay deterministic.
	Rand *rand.Rand
	// Logger receives debug and info lines. Nil discards them.
	Logger protocols.Logger
	// Unsafe switches on deliberately broken behaviour. It exists only so
	// that the simulator's tests can prove the checker catches it; never
	// set it elsewhere.
	Unsafe Unsafe
}

// Unsafe lists the deliberately broken variants used to prove the
// simulator's checker.
type Unsafe struct {
	// IDsOnly ranks members by id alone, ignoring their priorities, as
	// before priorities existed.
	IDsOnly bool
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	errs := highest.CheckConfig("ring", c.ID, c.Members, c.HardState, c.HeartbeatInterval, c.ElectionTimeout)
	switch c.Algorithm {
	case "", AlgLCR, AlgHS, AlgPeterson:
	default:
		errs = append(errs, fmt.Errorf("ring: algorithm %q must be %q, %q or %q", c.Algorithm, AlgLCR, AlgHS, AlgPeterson))
	}
	if c.PreemptDelay < 0 {
		errs = append(errs, errors.New("ring: preempt delay must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) durations() (hb, et time.Duration) {
	return highest.Durations(c.HeartbeatInterval, c.ElectionTimeout)
}
