package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/conclave-agent/conclave/api"
)

// DefaultElection is the name of the election the [election] table
// configures. Every agent runs it; local processes that name no election
// get it, so configurations and programs from before named elections keep
// their meaning.
const DefaultElection = api.DefaultElection

// MaxElections bounds the elections one agent runs, the default one
// included. Each election costs its leader a heartbeat per peer per
// interval (coalesced into one frame per peer) and, under majority with
// gossip, an announcement every observe.RefreshInterval: 64 keeps an
// idle agent's gossip queue and frames small (docs/elections.md).
const MaxElections = 64

// MaxElectionName bounds an election's name. It travels in every message
// of the election, in gossip announcements and in metric labels.
const MaxElectionName = api.MaxElectionName

// NamedElection is one [elections.NAME] table. A key left out (nil) is
// inherited from [election], so a named election needs to say only what
// differs.
type NamedElection struct {
	Protocol        *string   `toml:"protocol"`
	Voters          *[]string `toml:"voters"`
	ElectionTimeout *Duration `toml:"election_timeout"`
	PreVote         *bool     `toml:"prevote"`
	CheckQuorum     *bool     `toml:"check_quorum"`
	Preempt         *bool     `toml:"preempt"`
	RingAlgorithm   *string   `toml:"ring_algorithm"`
	PreemptDelay    *Duration `toml:"preempt_delay"`
	Candidacy       *string   `toml:"candidacy"`
	SessionTTL      *Duration `toml:"session_ttl"`
	Group           *string   `toml:"group"`
	// Priority is this agent's leadership priority in this election
	// (0–255), node.priority when left out: [election] has no key of its
	// own, node.priority is the default election's.
	Priority *int `toml:"priority"`
}

// Candidacy modes (election.candidacy).
const (
	CandidacyAlways  = "always"
	CandidacySession = "session"
)

// over returns base with the keys n sets replaced.
func (n NamedElection) over(base Election) Election {
	e := base
	e.Voters = append([]string(nil), base.Voters...)
	if n.Protocol != nil {
		e.Protocol = *n.Protocol
	}
	if n.Voters != nil {
		e.Voters = append([]string(nil), (*n.Voters)...)
	}
	if n.ElectionTimeout != nil {
		e.ElectionTimeout = *n.ElectionTimeout
	}
	if n.PreVote != nil {
		e.PreVote = *n.PreVote
	}
	if n.CheckQuorum != nil {
		e.CheckQuorum = *n.CheckQuorum
	}
	if n.Preempt != nil {
		e.Preempt = *n.Preempt
	}
	if n.RingAlgorithm != nil {
		e.RingAlgorithm = *n.RingAlgorithm
	}
	if n.PreemptDelay != nil {
		e.PreemptDelay = *n.PreemptDelay
	}
	if n.Candidacy != nil {
		e.Candidacy = *n.Candidacy
	}
	if n.SessionTTL != nil {
		e.SessionTTL = *n.SessionTTL
	}
	if n.Group != nil {
		e.Group = *n.Group
	}
	return e
}

// ElectionNames returns the names of every election this configuration
// runs: DefaultElection first, then the named ones in name order.
func (c *Config) ElectionNames() []string {
	names := make([]string, 0, 1+len(c.Elections))
	for name := range c.Elections {
		if name != DefaultElection {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return append([]string{DefaultElection}, names...)
}

// ElectionFor returns the settings of the election called name: [election]
// for DefaultElection, and [elections.NAME] over [election] for the
// others. ok is false for a name this configuration does not run.
func (c *Config) ElectionFor(name string) (Election, bool) {
	if name == DefaultElection || name == "" {
		return c.Election, true
	}
	n, ok := c.Elections[name]
	if !ok {
		return Election{}, false
	}
	return n.over(c.Election), true
}

// ElectionNameProblem says what is wrong with an election's name, or "".
// The rule is the socket API's (api.CheckElectionName): the name appears in
// socket paths, file names under data_dir, metric labels and every message
// of the election.
func ElectionNameProblem(name string) string {
	if err := api.CheckElectionName(name); err != nil {
		return err.Error()
	}
	return ""
}

// validateElections checks every [elections.NAME] table as the election it
// resolves to, naming the table's keys in what it reports.
func (c *Config) validateElections(ch *checker) {
	if len(c.Elections)+1 > MaxElections {
		ch.add("elections", "%d elections with the default one, at most %d: run the rest on another agent cluster (docs/elections.md)", len(c.Elections)+1, MaxElections)
	}
	for _, name := range c.ElectionNames()[1:] {
		table := "elections." + name
		if p := ElectionNameProblem(name); p != "" {
			ch.add(table, "%s", p)
			continue
		}
		e, _ := c.ElectionFor(name)
		c.validateElectionTable(ch, table, e)
		if p := c.PriorityFor(name); p < 0 || p > 255 {
			ch.add(table+".priority", "%d is out of range: must be 0 … 255", p)
		}
	}
	if _, ok := c.Elections[DefaultElection]; ok {
		ch.add("elections."+DefaultElection, "the election %q is the [election] table; configure it there", DefaultElection)
	}
}

// parseElectionFlag parses one -elections flag, NAME.KEY=VALUE, into the
// change it makes: the VALUE is typed as the [election] key KEY is (a
// list takes commas), and decoded as TOML so that it is checked exactly
// as the file's [elections.NAME] tables are.
func parseElectionFlag(s string) (func(*Config), error) {
	lhs, value, ok := strings.Cut(s, "=")
	name, key, dotted := strings.Cut(lhs, ".")
	if !ok || !dotted {
		return nil, fmt.Errorf("want NAME.KEY=VALUE, such as scheduler.protocol=bully")
	}
	if p := ElectionNameProblem(name); p != "" {
		return nil, fmt.Errorf("%s", p)
	}
	kind, known := keyKinds["election."+key]
	if key == "priority" {
		kind, known = keyKinds["node.priority"]
	}
	if !known {
		return nil, fmt.Errorf("%q is not a key of [election] (config.example.toml lists them)", key)
	}
	var lit string
	switch kind {
	case kindList:
		items, _ := parseList(value)
		quoted := make([]string, len(items))
		for i, it := range items {
			quoted[i] = strconv.Quote(it)
		}
		lit = "[" + strings.Join(quoted, ", ") + "]"
	case kindString:
		lit = strconv.Quote(value)
	default:
		lit = value
	}
	var t struct {
		Elections map[string]NamedElection `toml:"elections"`
	}
	if _, err := toml.Decode(fmt.Sprintf("[elections.%s]\n%s = %s\n", name, key, lit), &t); err != nil {
		return nil, fmt.Errorf("%s: %w", lhs, err)
	}
	set := t.Elections[name]
	return func(c *Config) {
		if c.Elections == nil {
			c.Elections = make(map[string]NamedElection)
		}
		c.Elections[name] = merge(c.Elections[name], set)
	}, nil
}

// merge returns n with the keys set sets replaced.
func merge(n, set NamedElection) NamedElection {
	if set.Protocol != nil {
		n.Protocol = set.Protocol
	}
	if set.Voters != nil {
		n.Voters = set.Voters
	}
	if set.ElectionTimeout != nil {
		n.ElectionTimeout = set.ElectionTimeout
	}
	if set.PreVote != nil {
		n.PreVote = set.PreVote
	}
	if set.CheckQuorum != nil {
		n.CheckQuorum = set.CheckQuorum
	}
	if set.Preempt != nil {
		n.Preempt = set.Preempt
	}
	if set.RingAlgorithm != nil {
		n.RingAlgorithm = set.RingAlgorithm
	}
	if set.PreemptDelay != nil {
		n.PreemptDelay = set.PreemptDelay
	}
	if set.Candidacy != nil {
		n.Candidacy = set.Candidacy
	}
	if set.SessionTTL != nil {
		n.SessionTTL = set.SessionTTL
	}
	if set.Group != nil {
		n.Group = set.Group
	}
	if set.Priority != nil {
		n.Priority = set.Priority
	}
	return n
}

// PriorityFor is this agent's leadership priority in the election called
// name: node.priority unless its [elections.NAME] table sets priority.
func (c *Config) PriorityFor(name string) int {
	if n, ok := c.Elections[name]; ok && n.Priority != nil && name != DefaultElection {
		return *n.Priority
	}
	return c.Node.Priority
}

// ElectionPriorities lists the named elections whose priority differs from
// node.priority, as gossip publishes them to the other agents.
func (c *Config) ElectionPriorities() map[string]uint8 {
	var out map[string]uint8
	for _, name := range c.ElectionNames()[1:] {
		if p := c.PriorityFor(name); p != c.Node.Priority && p >= 0 && p <= 255 {
			if out == nil {
				out = make(map[string]uint8)
			}
			out[name] = uint8(p)
		}
	}
	return out
}

// GroupAnchor returns the election that leads the fate-sharing group
// called group: the first of its elections in ElectionNames' order (the
// default election first, then by name). The others follow it: an agent
// stands in them only while it leads the anchor. "" when no election is
// in the group.
func (c *Config) GroupAnchor(group string) string {
	if group == "" {
		return ""
	}
	for _, name := range c.ElectionNames() {
		if e, _ := c.ElectionFor(name); e.Group == group {
			return name
		}
	}
	return ""
}
