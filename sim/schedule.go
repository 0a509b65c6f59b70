package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// FaultKind names a kind of injected fault.
type FaultKind uint8

// Fault kinds. The first group is what a Schedule's Actions inject; Drop and
// Duplicate are per-message faults counted as they happen.
const (
	// FaultSplit partitions the nodes into a random minority and majority.
	FaultSplit FaultKind = iota
	// FaultIsolateLeader cuts the current leader (or a random node when
	// nobody leads) off from everyone, both ways.
	FaultIsolateLeader
	// FaultBridge splits the nodes into two halves that only one bridge
	// node hears and reaches.
	FaultBridge
	// FaultOneWay cuts the links from one random group to the rest while the
	// opposite direction keeps working.
	FaultOneWay
	// FaultCrash crashes a node: its instance and every input in flight to
	// it are lost; it restarts from its persisted HardState after Duration.
	FaultCrash
	// FaultPause freezes a node's process for Duration (longer than an
	// election timeout): no ticks, inbound messages are buffered and
	// delivered on resume, its clock runs on.
	FaultPause
	// FaultSlowNetwork raises the maximum message delay to between half and
	// three election timeouts for Duration.
	FaultSlowNetwork
	// FaultResign asks the current leader to resign.
	FaultResign
	// FaultDrop is one message lost at random.
	FaultDrop
	// FaultDuplicate is one message delivered twice.
	FaultDuplicate
	// FaultLongDelay is one message held back an extra one to three
	// election timeouts (a stalled stream's retransmission).
	FaultLongDelay
	// FaultPoison makes the target node send every other node a heartbeat
	// claiming leadership in term and epoch Action.Value (the epoch's low
	// bits replaced by the sender's id, so bully and ring take it as the
	// sender's own): a buggy build or a hostile member. Values up to
	// protocols.MaxAccepted must be survived, larger ones refused.
	// RandomSchedule draws it only when Options.Faults names it, with a
	// value from PoisonValues.
	FaultPoison
	// FaultVoterChange asks the current leader (a protocols.VoterChanger)
	// to add a random non-voter or remove a random voter — itself
	// included — one voter at a time; refusals (a change in flight, the
	// quorum would be lost) are traced. Only drawn when Options.Faults
	// names it (VoterFaults).
	FaultVoterChange
	// FaultHealth makes a node ineligible for leadership (a failing check,
	// maintenance) for Duration; short durations make it flap. Target
	// TargetNextPersist arms it for the next node to persist a HardState
	// (a candidate raising its term, a voter granting): maintenance in the
	// middle of an election. Only drawn when Options.Faults names it
	// (HealthFaults); see sim/health.go.
	FaultHealth
	// FaultRestartNewPeer (core mode) crashes a node and restarts it
	// after Duration with a new libp2p identity: other members learn
	// another peer id for the same name and id.
	FaultRestartNewPeer
	// FaultLeave (core mode) makes a node leave the cluster gracefully
	// (resigning first if it leads, as the agent does on shutdown) and
	// stop; it rejoins after Duration.
	FaultLeave
	// FaultPauseGroup freezes every node, or a random group of at least
	// two, at one instant for Duration (over two election timeouts, so
	// every running election timer expires meanwhile), and resumes them
	// all at one instant: a host overload, a VM pause or SIGSTOP of a
	// host group. Only drawn when Options.Faults names it
	// (MajorityFaults).
	FaultPauseGroup
	// FaultSession (Options.Elections with a session election): a local
	// process of a node opens a session, checking in for Duration and
	// then closing it or falling silent (it expires after the TTL), or
	// the node's holders close theirs or stop checking in (sessions.go).
	// Only drawn when Options.Faults names it.
	FaultSession
	// FaultWipedRestart (core mode) crashes a node and restarts it after
	// Duration as from an emptied data directory, where membership is
	// concerned: a new libp2p identity, no member snapshot and no
	// gossip.join, so it knows nobody; the others, which still list it,
	// must join it (core.Rejoin). Its HardState and observed epoch are
	// kept: a voter that forgets its vote is unsafe by design, and the
	// checker would say so. Drawn by Run from a stream of its own
	// (drawMemberFaults), not by RandomSchedule.
	FaultWipedRestart
	// FaultSeedSplit (core mode) stages a cluster's formation through a
	// single seed: the seed and two other nodes restart with new
	// identities and empty member lists, the two join the seed at one
	// instant (each gets the seed's answer before the seed merged the
	// other, so neither learns the other) with gossip.join naming the
	// seed alone, and the seed crashes at once, before its next gossip
	// round; it returns after Duration from the member snapshot it
	// wrote, naming the two. Drawn as FaultWipedRestart is.
	FaultSeedSplit

	// NumFaultKinds is the number of fault kinds.
	NumFaultKinds
)

var faultNames = [...]string{
	FaultSplit:          "split",
	FaultIsolateLeader:  "isolate-leader",
	FaultBridge:         "bridge",
	FaultOneWay:         "one-way",
	FaultCrash:          "crash",
	FaultPause:          "pause",
	FaultSlowNetwork:    "slow-network",
	FaultResign:         "resign",
	FaultDrop:           "drop",
	FaultDuplicate:      "duplicate",
	FaultLongDelay:      "long-delay",
	FaultPoison:         "poison",
	FaultVoterChange:    "voter-change",
	FaultHealth:         "health",
	FaultRestartNewPeer: "restart-new-peer",
	FaultLeave:          "leave",
	FaultPauseGroup:     "pause-group",
	FaultSession:        "session",
	FaultWipedRestart:   "wiped-restart",
	FaultSeedSplit:      "seed-split",
}

// String returns the fault kind's short name.
func (k FaultKind) String() string {
	if k < NumFaultKinds {
		return faultNames[k]
	}
	return fmt.Sprintf("fault(%d)", uint8(k))
}

// ScheduledFaults returns every kind a Schedule's Actions can inject.
func ScheduledFaults() []FaultKind {
	return []FaultKind{FaultSplit, FaultIsolateLeader, FaultBridge, FaultOneWay,
		FaultCrash, FaultPause, FaultSlowNetwork, FaultResign}
}

// VoterFaults is ScheduledFaults plus voter changes, for protocols whose
// voter set is replicated (majority).
func VoterFaults() []FaultKind {
	return append(ScheduledFaults(), FaultVoterChange)
}

// MajorityFaults is ScheduledFaults plus group pauses, which line up
// majority's randomised election timers (docs/multihost.md).
func MajorityFaults() []FaultKind {
	return append(ScheduledFaults(), FaultPauseGroup)
}

// CoreFaults is ScheduledFaults plus the membership faults only core mode
// models (Options.Core): restarts with a new peer id and graceful leaves.
func CoreFaults() []FaultKind {
	return append(ScheduledFaults(), FaultRestartNewPeer, FaultLeave)
}

// Targets an Action can name instead of a node index.
const (
	// TargetRandom picks a random node when the action fires.
	TargetRandom = -1
	// TargetLeader picks the node that currently reports itself leader, or
	// a random node when none does.
	TargetLeader = -2
	// TargetLastPersisted picks the node that most recently persisted a
	// HardState (say, a vote it just cast), or a random node.
	TargetLastPersisted = -3
	// TargetNextPersist (crash only) arms the fault: the next node to
	// persist a HardState crashes right after handling that Ready, its
	// messages sent (for instance just after replying to a vote).
	TargetNextPersist = -4
	// TargetNextVoteGrant (crash only) arms the fault for the next node to
	// grant a vote (send MsgVoteResp without Reject): it crashes right after
	// that Ready is handled.
	TargetNextVoteGrant = -5
	// TargetTransferTarget (crash only) arms the fault for the target of
	// the next leadership transfer: it crashes right after the leader
	// sends it TimeoutNow (a preferred node crashing mid-transfer); in
	// bully and ring, the receiver of a resigning leader's opening, or a
	// member taking leadership from a live leader right after its first
	// announcement (sim/health.go, handoverSent).
	TargetTransferTarget = -6
)

// Action is one fault of a Schedule.
type Action struct {
	// At is the virtual time since the start of the run.
	At time.Duration
	// Kind is the fault.
	Kind FaultKind
	// Target is a node index (0-based) for crash, pause and the isolated or
	// bridge node, or TargetRandom / TargetLeader. Partition groups are
	// drawn when the action fires.
	Target int
	// Duration is how long until the fault is undone (crash: until the
	// restart). The heal at the end of the fault phase undoes everything.
	Duration time.Duration
	// Value is the term and epoch a FaultPoison sends.
	Value uint64
}

// Schedule is a complete fault plan for one run.
type Schedule struct {
	// Nodes is the cluster size.
	Nodes int
	// FaultPhase is when every fault is healed.
	FaultPhase time.Duration
	// Actions, in order of At.
	Actions []Action
	// DropProb, DupProb and LongDelayProb apply to every message sent
	// during the fault phase.
	DropProb, DupProb, LongDelayProb float64
	// MinDelay and MaxDelay bound the uniformly random delay of every
	// message; different delays reorder messages.
	MinDelay, MaxDelay time.Duration
	// ClockRates are each node's clock rate, within 1±MaxClockDrift.
	ClockRates []float64
	// Priorities are each node's leadership priority (health schedules;
	// nil means all 0).
	Priorities []uint8
}

// RandomSchedule draws a schedule from rng for the given options (zero
// fields take their defaults; Factory and Checks are not used). It leaves
// out the address faults (FaultWipedRestart, FaultSeedSplit), which Run
// adds from a stream of their own.
func RandomSchedule(rng *rand.Rand, o Options) Schedule {
	o = o.fill()
	et := o.ElectionTimeout
	s := Schedule{Nodes: o.Nodes}
	if s.Nodes == 0 {
		s.Nodes = []int{3, 5, 7}[rng.IntN(3)]
	}
	s.FaultPhase = o.FaultPhaseMin + randDur(rng, o.FaultPhaseMax-o.FaultPhaseMin)
	s.MinDelay = randDur(rng, time.Millisecond)
	s.MaxDelay = s.MinDelay + randDur(rng, et/10)
	if !o.NoMessageFaults {
		if rng.IntN(3) > 0 {
			s.DropProb = rng.Float64() * 0.3
		}
		if rng.IntN(3) > 0 {
			s.DupProb = rng.Float64() * 0.2
		}
		if rng.IntN(2) > 0 {
			s.LongDelayProb = rng.Float64() * 0.05
		}
	}
	s.ClockRates = make([]float64, s.Nodes)
	for i := range s.ClockRates {
		s.ClockRates[i] = 1 + o.MaxClockDrift*(2*rng.Float64()-1)
		if rng.IntN(4) == 0 { // extremes are the interesting cases
			s.ClockRates[i] = 1 + o.MaxClockDrift*float64(2*rng.IntN(2)-1)
		}
	}
	kinds := slices.DeleteFunc(slices.Clone(o.Faults), memberFault)
	if len(kinds) == 0 {
		return s
	}
	health := drawPriorities(rng, o, &s)
	t := randDur(rng, 3*et)
	poisoned := 0
	for t < s.FaultPhase {
		k := kinds[rng.IntN(len(kinds))]
		a := Action{At: t, Kind: k, Target: TargetRandom}
		switch k {
		case FaultSplit, FaultBridge, FaultOneWay:
			a.Duration = 2*et + randDur(rng, 20*et)
		case FaultIsolateLeader:
			a.Target = TargetLeader
			a.Duration = 2*et + randDur(rng, 20*et)
		case FaultCrash:
			if health && rng.IntN(4) == 0 {
				a.Target = TargetTransferTarget
				a.Duration = randDur(rng, 10*et)
				break
			}
			switch rng.IntN(5) {
			case 0:
				a.Target = TargetLeader
			case 1:
				a.Target = TargetLastPersisted
			case 2:
				a.Target = TargetNextPersist
			case 3:
				a.Target = TargetNextVoteGrant
			}
			a.Duration = randDur(rng, 10*et)
			if rng.IntN(2) == 0 { // a quick restart, as from a supervisor
				a.Duration = randDur(rng, et)
			}
		case FaultPause:
			if rng.IntN(2) == 0 {
				a.Target = TargetLeader
			}
			a.Duration = et*3/2 + randDur(rng, 5*et)
		case FaultPauseGroup:
			a.Duration = 2*et + randDur(rng, 4*et)
		case FaultSlowNetwork:
			a.Duration = et + randDur(rng, 10*et)
		case FaultResign, FaultVoterChange:
			a.Target = TargetLeader
		case FaultSession:
			if rng.IntN(2) == 0 {
				a.Target = TargetLeader
			}
			a.Duration = et + randDur(rng, 15*et)
		case FaultHealth:
			a.Target, a.Duration = healthAction(rng, et)
		case FaultRestartNewPeer:
			if rng.IntN(2) == 0 {
				a.Target = TargetLeader
			}
			a.Duration = randDur(rng, 10*et)
			if rng.IntN(2) == 0 {
				a.Duration = randDur(rng, et)
			}
		case FaultLeave:
			if rng.IntN(2) == 0 {
				a.Target = TargetLeader
			}
			a.Duration = 2*et + randDur(rng, 20*et)
		case FaultPoison:
			// Each value at most once a schedule: two members claiming
			// leadership of one epoch are hostile beyond what any
			// invariant can survive (they disagree on its leader by
			// construction); one that lies is what the nemesis models.
			if poisoned == len(PoisonValues) {
				t += randDur(rng, 5*et)
				continue
			}
			a.Value = PoisonValues[poisoned]
			poisoned++
		}
		s.Actions = append(s.Actions, a)
		t += randDur(rng, 5*et)
	}
	return s
}

// PoisonValues are what the poison nemesis sends: the largest value every
// node accepts from anyone (protocols.MaxAccepted), the ceiling itself, and
// two absurd values next to the wrap. Values between MaxAccepted and
// MaxAccepted+TermSlack are left out on purpose: they are accepted too,
// but a node that missed them cannot follow once the cluster has elected
// past MaxAccepted+TermSlack (see protocols.Ceiling), and the liveness
// check wants every node to follow.
var PoisonValues = []uint64{
	protocols.MaxAccepted,
	protocols.Ceiling,
	math.MaxUint64 - 1,
	math.MaxUint64,
}

// randDur returns a uniformly random duration in [0, d).
func randDur(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}
