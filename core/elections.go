package core

import (
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// An agent may run several named elections (docs/elections.md): one Node
// each, over the agent's one membership and transport. The default
// election's wire format is the one agents spoke before named elections,
// so that they and newer agents keep electing together; a named
// election's messages and announcements carry its name, in encodings an
// older agent refuses rather than misreads.

// DefaultElection is the name of the election [election] configures.
const DefaultElection = config.DefaultElection

// NamedElectionsVersion is the first peer protocol version
// (membership.ProtocolVersion) that runs named elections. A named
// election leaves older members out: they would never answer its
// messages, and bully and ring would wait on them as live candidates.
const NamedElectionsVersion = 2

// wireName is the name a message of the election called name carries.
func wireName(name string) string {
	if name == DefaultElection {
		return ""
	}
	return name
}

// electionNameProblem says what is wrong with an election's name, or "".
func electionNameProblem(name string) string {
	if name == "" || name == DefaultElection {
		return ""
	}
	return config.ElectionNameProblem(name)
}

// Name is the election's name: DefaultElection or a configured one.
func (n *Node) Name() string {
	if n.wire == "" {
		return DefaultElection
	}
	return n.wire
}

// named reports whether this is a named election (not the default one).
func (n *Node) named() bool { return n.wire != "" }

// outOfElection reports whether member m takes no part in this election:
// an agent too old to run named elections, or one whose gossip metadata
// says it does not run this one (membership.Member.MayRun). Bully and ring
// would otherwise count it a candidate that never answers.
func (n *Node) outOfElection(m membership.Member) bool {
	return n.named() && ((m.Version != 0 && m.Version < NamedElectionsVersion) || !m.MayRun(n.wire))
}

// ElectionOf returns the election a message received from the transport
// or gossip belongs to, so that the shell hands it to that election's
// Node: the name a message carries, or the name in a gossiped
// announcement; DefaultElection for neither. ok is false for gossip that
// is no announcement the core reads.
func ElectionOf(gossiped []byte) (name string, ok bool) {
	a, err := observe.Decode(gossiped)
	if err != nil {
		return "", false
	}
	if a.Election == "" {
		return DefaultElection, true
	}
	return a.Election, true
}
