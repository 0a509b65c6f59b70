package registry

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/conclave-agent/conclave/protocols/majority"
	"github.com/conclave-agent/conclave/sim"
)

// The schedules matrix: every registered variant (bare and core mode)
// against every fault set, each cell with the checks that fit it. A
// pairing that cannot apply is listed with the reason, and so is every
// check a cell switches off, so that nothing is silently uncovered
// (docs/simulator.md, "The matrix"). CI runs every cell with a batch seed
// drawn from the commit under test (sim's TestMatrix); the soak command
// runs any cell (-cell).

// Fault sets: the matrix's columns.
const (
	// SetFaults is the variant's whole scheduled nemesis: partitions,
	// crashes (some right after a persist or a vote), pauses, group
	// stalls, a slow network, resignations, message loss, duplication and
	// long delays, and poisoned terms and epochs; in core mode also the
	// membership model's restarts with a new peer id and graceful leaves.
	SetFaults = "faults"
	// SetVoters adds voter changes (three times as often as each other
	// kind) with two nodes starting as observers.
	SetVoters = "voters"
	// SetHealth adds health changes: eligibility flaps, maintenance in
	// the middle of elections, random priorities, preferred nodes crashing
	// mid-transfer.
	SetHealth = "health"
	// SetSessions (the multi-election variant) adds the session nemesis
	// (sim.FaultSession) to the base one, over named elections whose
	// candidacy sessions hold.
	SetSessions = "sessions"
	// SetGroups (the multi-election variant) runs the base faults over
	// named elections in the default election's fate-sharing group.
	SetGroups = "groups"
)

// addressCells are the variants whose faults cell adds the membership
// model's address faults (sim.FaultWipedRestart, sim.FaultSeedSplit):
// majority, whose quorum a member nobody reaches costs, and bully, where
// a seed split elects twice. They run the agent's rejoin glue, which
// costs a third more CPU per schedule that draws one, so not every core
// cell carries them.
var addressCells = []string{"core-majority", "core-bully"}

// FaultSets lists the matrix's columns in order.
func FaultSets() []string { return []string{SetFaults, SetVoters, SetHealth, SetSessions, SetGroups} }

// Cell is one pairing of a variant with a fault set.
type Cell struct {
	// Variant is the registry name (Names, CoreNames).
	Variant string
	// Set is the fault set (FaultSets).
	Set string
	// NotApplicable, when set, says why this pairing is not run.
	NotApplicable string
	// Off lists the checks this cell switches off, each with its reason.
	Off []string
	// Schedules, when not zero, is the cell's own count of schedules in
	// CI's matrix, for a cell whose schedules cost several times a core
	// cell's (sim's TestMatrix).
	Schedules int
}

// Name is the cell's name for -cell and the CI log: variant/set.
func (c Cell) Name() string { return c.Variant + "/" + c.Set }

// Runs reports whether the cell is run (it applies).
func (c Cell) Runs() bool { return c.NotApplicable == "" }

// Reasons a check is switched off or a pairing does not apply; each is
// said once and shared by the cells it concerns.
const (
	offLeaseHighest = "lease, vote-once-per-term: bully and ring hold no lease and cast no votes; " +
		"two sides of a partition may both elect, in different epochs (docs/design.md §1.2)"
	offProbeHealth = "failover probe: health faults may leave no live voter eligible, or the probe may crash " +
		"the only eligible one, so no leader is owed within its bound; liveness after the heal still holds"
	offPreferredMajority = "preferred-leads: majority hands over only to a voter of strictly higher priority " +
		"(equal priorities keep the leader, observers never lead), not to the (priority, id) rank the check uses"
	offPreferredProbe = "preferred-leads: core mode ends the run with the failover probe instead of a quiet"
	offPoisonCore     = "poison (fault): an observer that adopts a poisoned term never follows the voters' leader, " +
		"whose lower epoch it may not report (epochs never go back) and whose voters never hear the term " +
		"(observers learn by gossip); open finding, docs/simulator.md"
	offPoisonHealth = "poison (fault): with health faults the ring variants may elect nobody after the heal " +
		"once a poisoned epoch was adopted (liveness); open finding, docs/simulator.md"
	offLivenessHSHealth = "liveness and preferred-leads (after liveness): an HS candidate whose round was lost " +
		"under health faults may stay a candidate for good while the others follow another leader " +
		"(core mode about 1 in 60,000 schedules; bare mode 1 in 17,000 since ring's acknowledgements); " +
		"open finding, docs/simulator.md finding 13, a ring liveness tail"
	naVoters = "bully and ring have no replicated voter set: their members are whoever gossip " +
		"(or the bare run's fixed list) says is up"
	naSessions = "the session nemesis opens and ends sessions of named elections; " +
		"only the multi-election variant (core-multi) runs named elections"
	naMultiVoters = "voter changes and health faults go to every election alike; the single-election cells " +
		"cover them, and the multi-election cells what several elections add: routing, separate state, isolation, sessions"
	offProbeMulti = "failover probe, settle: with several elections the run ends once every election is live " +
		"after the heal; the probe is defined on one election's leader"
	offLeaseNamed = "lease, vote-once-per-term, isolation in the bully and ring elections: they hold no lease, cast no votes, " +
		"and a member's return may start an election round that elects the same leader anew"
	offIsolationSessions = "isolation in the session elections: a session's end moves leadership by design"
	naGroups             = "fate-sharing groups join named elections to the default one; " +
		"only the multi-election variant (core-multi) runs named elections"
	offIsolationGroups = "isolation in the group elections: they move with the anchor's leader by design"
)

// Per-cell counts of the multi-election cells in CI's matrix: each of
// their schedules costs about four core-majority ones (four elections
// per node), and the two cells together stay within a minute of CPU.
const (
	multiFaultsSchedules   = 1500
	multiSessionsSchedules = 1000
	multiGroupsSchedules   = 1000
)

// multiCells are the multi-election variant's cells.
func multiCells() []Cell {
	var cells []Cell
	for _, set := range FaultSets() {
		c := Cell{Variant: MultiVariant, Set: set}
		switch set {
		case SetFaults:
			c.Off, c.Schedules = []string{offPoisonCore, offProbeMulti, offLeaseNamed}, multiFaultsSchedules
		case SetSessions:
			c.Off, c.Schedules = []string{offPoisonCore, offProbeMulti, offLeaseNamed, offIsolationSessions}, multiSessionsSchedules
		case SetGroups:
			c.Off, c.Schedules = []string{offPoisonCore, offProbeMulti, offLeaseNamed, offIsolationGroups}, multiGroupsSchedules
		default:
			c.NotApplicable = naMultiVoters
		}
		cells = append(cells, c)
	}
	return cells
}

// Matrix returns every cell, variants in registry order (bare, then core
// mode), fault sets in FaultSets order.
func Matrix() []Cell {
	var cells []Cell
	for _, v := range append(Names(), CoreNames()...) {
		if v == MultiVariant {
			cells = append(cells, multiCells()...)
			continue
		}
		majority := strings.HasSuffix(v, "majority")
		for _, set := range FaultSets() {
			c := Cell{Variant: v, Set: set}
			if set == SetSessions || set == SetGroups {
				c.NotApplicable = naSessions
				if set == SetGroups {
					c.NotApplicable = naGroups
				}
				cells = append(cells, c)
				continue
			}
			if core := strings.HasPrefix(v, "core-"); core {
				c.Off = append(c.Off, offPoisonCore)
			} else if set == SetHealth {
				c.Off = append(c.Off, offPoisonHealth)
			}
			if !majority {
				c.Off = append(c.Off, offLeaseHighest)
			}
			core := strings.HasPrefix(v, "core-")
			switch {
			case set == SetVoters && !majority:
				c.NotApplicable = naVoters
				c.Off = nil
			case set == SetHealth && core:
				c.Off = append(c.Off, offProbeHealth)
				if majority {
					c.Off = append(c.Off, offPreferredMajority)
				}
				if v == "core-ring-hs" {
					c.Off = append(c.Off, offLivenessHSHealth)
				}
			case set == SetHealth && majority:
				c.Off = append(c.Off, offPreferredMajority)
			case set == SetHealth && v == "ring-hs":
				c.Off = append(c.Off, offLivenessHSHealth)
			case core:
				c.Off = append(c.Off, offPreferredProbe)
			}
			cells = append(cells, c)
		}
	}
	return cells
}

// LookupCell returns the cell named variant/set.
func LookupCell(name string) (Cell, error) {
	i := slices.IndexFunc(Matrix(), func(c Cell) bool { return c.Name() == name })
	if i < 0 {
		var names []string
		for _, c := range Matrix() {
			if c.Runs() {
				names = append(names, c.Name())
			}
		}
		return Cell{}, fmt.Errorf("registry: unknown matrix cell %q (have %s)", name, strings.Join(names, ", "))
	}
	c := Matrix()[i]
	if !c.Runs() {
		return Cell{}, fmt.Errorf("registry: matrix cell %s is not run: %s", name, c.NotApplicable)
	}
	return c, nil
}

// Options returns the simulator options of the cell: the variant's own,
// its fault set and the checks that fit.
func (c Cell) Options() (sim.Options, error) {
	if !c.Runs() {
		return sim.Options{}, fmt.Errorf("registry: matrix cell %s is not run: %s", c.Name(), c.NotApplicable)
	}
	o, err := Options(c.Variant)
	if err != nil {
		return sim.Options{}, err
	}
	core := o.Core != nil
	// The base nemesis: the variant's own scheduled faults (core mode's
	// include the membership model's) with group stalls and poison.
	if len(o.Faults) == 0 {
		o.Faults = sim.ScheduledFaults()
	}
	o.Faults = slices.Clone(o.Faults)
	if !slices.Contains(o.Faults, sim.FaultPauseGroup) {
		o.Faults = append(o.Faults, sim.FaultPauseGroup)
	}
	if !c.withoutPoison() {
		o.Faults = append(o.Faults, sim.FaultPoison)
	}
	if c.Set == SetFaults && slices.Contains(addressCells, c.Variant) {
		o.Faults = append(o.Faults, sim.FaultWipedRestart, sim.FaultSeedSplit)
	}
	switch c.Set {
	case SetVoters:
		o.Faults = append(o.Faults, sim.FaultVoterChange, sim.FaultVoterChange, sim.FaultVoterChange)
		o.Observers = 2
	case SetHealth:
		o.Faults = append(o.Faults, sim.FaultHealth, sim.FaultHealth)
		o.Checks.Health = true
		if core {
			o.Checks.FailoverBound = 0
		}
	case SetSessions:
		o.Elections = SessionElections(o.ElectionTimeout)
		o.Faults = append(o.Faults, sim.FaultSession, sim.FaultSession, sim.FaultSession, sim.FaultSession, sim.FaultSession, sim.FaultSession)
	case SetGroups:
		o.Elections = GroupElections(o.ElectionTimeout)
	}
	if len(o.Elections) > 0 {
		return o, nil
	}
	if !strings.HasSuffix(c.Variant, "majority") && o.Checks.FailoverBound == 0 {
		// The preempt delay (3 election timeouts) and ten more for the
		// takeover, then the preferred-leader check.
		o.Checks.Settle = 13 * o.ElectionTimeout
		o.Checks.Preferred = true
	}
	if slices.Contains(c.Off, offLivenessHSHealth) {
		o.Checks.LivenessBound, o.Checks.Preferred, o.Checks.Settle = 0, false, 0
	}
	return o, nil
}

// BatchSeed derives a cell's batch seed from a base seed (CI: the commit
// under test), so that every cell draws its own schedules and one base
// replays them all.
func BatchSeed(base uint64, cell string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", base, cell)
	s := h.Sum64()
	if s == 0 {
		s = 1
	}
	return s
}

// withoutPoison reports whether the cell leaves the poison nemesis out
// (Off says why).
func (c Cell) withoutPoison() bool {
	return slices.Contains(c.Off, offPoisonCore) || slices.Contains(c.Off, offPoisonHealth)
}

// plantedMajority names majority's planted bugs (majority.Unsafe) for the
// soak command's -unsafe flag.
var plantedMajority = map[string]func(*majority.Unsafe){
	"vote-not-persisted":             func(u *majority.Unsafe) { u.VoteNotPersisted = true },
	"quorum-of-gossip-view":          func(u *majority.Unsafe) { u.QuorumOfGossipView = true },
	"ignore-lease":                   func(u *majority.Unsafe) { u.IgnoreLease = true },
	"vote-for-older-config":          func(u *majority.Unsafe) { u.VoteForOlderConfig = true },
	"change-before-inherited-commit": func(u *majority.Unsafe) { u.ChangeBeforeInheritedCommit = true },
	"ineligible-campaigns":           func(u *majority.Unsafe) { u.IneligibleCampaigns = true },
	"restart-forgets-lease":          func(u *majority.Unsafe) { u.RestartForgetsLease = true },
	"lease-too-long":                 func(u *majority.Unsafe) { u.LeaseTooLong = true },
	"ignore-held-config":             func(u *majority.Unsafe) { u.IgnoreHeldConfig = true },
}

// PlantedNames lists the planted majority bugs Plant accepts, sorted.
func PlantedNames() []string {
	names := make([]string, 0, len(plantedMajority))
	for n := range plantedMajority {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Plant switches on the named planted majority bugs (comma-separated) in
// o, which must be a bare majority cell's options: it exists to show that
// a cell's checks catch a bug, never to run a real configuration.
func (c Cell) Plant(o *sim.Options, names string) error {
	if c.Variant != "majority" {
		return fmt.Errorf("registry: planted bugs are for the majority cells, not %s", c.Name())
	}
	var u majority.Unsafe
	for _, name := range strings.Split(names, ",") {
		set, ok := plantedMajority[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("registry: unknown planted bug %q (have %s)", name, strings.Join(PlantedNames(), ", "))
		}
		set(&u)
	}
	o.Factory = Majority(u)
	return nil
}
