package protocols

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxVoters bounds the voters of a configuration, so that a persisted or
// received configuration can be size-checked before anything is allocated
// for it.
const MaxVoters = 32

// MaxNameLen is the longest voter name a configuration accepts (the
// config file's limit for node names).
const MaxNameLen = 64

// MaxVotersLen bounds the encoded length of Configuration.Voters.
const MaxVotersLen = MaxVoters*(MaxNameLen+1) - 1

// Configuration is the replicated voter set of a majority cluster: Index
// counts configurations and only grows, Term is the term of the leader that
// proposed it (0 for a bootstrap list read from the config file). Voters is
// the sorted, de-duplicated names joined by commas — a string, so that
// HardState and Status stay comparable with ==. Use NewConfiguration to
// build one. The zero value means "no configuration".
type Configuration struct {
	Term   uint64
	Index  uint64
	Voters string
}

// NewConfiguration returns the configuration of the given voters, sorted
// and checked.
func NewConfiguration(term, index uint64, voters []string) (Configuration, error) {
	if len(voters) > MaxVoters {
		return Configuration{}, fmt.Errorf("protocols: %d voters, at most %d", len(voters), MaxVoters)
	}
	vs := slices.Clone(voters)
	slices.Sort(vs)
	for i, v := range vs {
		if err := checkName(v); err != nil {
			return Configuration{}, err
		}
		if i > 0 && vs[i-1] == v {
			return Configuration{}, fmt.Errorf("protocols: voter %q listed twice", v)
		}
	}
	c := Configuration{Term: term, Index: index, Voters: strings.Join(vs, ",")}
	if len(vs) == 0 {
		return Configuration{}, errors.New("protocols: a configuration needs at least one voter")
	}
	return c, nil
}

func checkName(v string) error {
	if v == "" || len(v) > MaxNameLen {
		return fmt.Errorf("protocols: voter name %q must be 1 to %d bytes", v, MaxNameLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("protocols: voter name %q may contain only letters, digits, '-', '_' and '.'", v)
		}
	}
	return nil
}

// Check reports whether c is well formed: empty, or a sorted list of at
// most MaxVoters distinct valid names. Decoders call it on untrusted input.
func (c Configuration) Check() error {
	if c.IsZero() {
		return nil
	}
	if len(c.Voters) > MaxVotersLen {
		return fmt.Errorf("protocols: voter list of %d bytes, at most %d", len(c.Voters), MaxVotersLen)
	}
	vs := c.VoterList()
	if len(vs) > MaxVoters {
		return fmt.Errorf("protocols: %d voters, at most %d", len(vs), MaxVoters)
	}
	n, err := NewConfiguration(c.Term, c.Index, vs)
	if err != nil {
		return err
	}
	if n.Voters != c.Voters {
		return fmt.Errorf("protocols: voter list %q is not sorted", c.Voters)
	}
	return nil
}

// IsZero reports whether c is no configuration at all.
func (c Configuration) IsZero() bool { return c == Configuration{} }

// VoterList returns the voter names, sorted.
func (c Configuration) VoterList() []string {
	if c.Voters == "" {
		return nil
	}
	return strings.Split(c.Voters, ",")
}

// Len returns the number of voters.
func (c Configuration) Len() int {
	if c.Voters == "" {
		return 0
	}
	return strings.Count(c.Voters, ",") + 1
}

// Has reports whether name is a voter of c.
func (c Configuration) Has(name string) bool {
	if name == "" {
		return false
	}
	for v := range strings.SplitSeq(c.Voters, ",") {
		if v == name {
			return true
		}
	}
	return false
}

// QuorumSize is how many of n voters make a majority.
func QuorumSize(n int) int { return n/2 + 1 }

// Quorum counts the voters of c for which reach is true and says whether
// they make a majority of c. Drivers report quorum health with it instead of
// re-deriving the arithmetic, and from the configuration the protocol uses,
// not from a configuration file that may disagree with it.
func (c Configuration) Quorum(reach func(name string) bool) (voters, reachable int, healthy bool) {
	for v := range strings.SplitSeq(c.Voters, ",") {
		if v != "" && reach(v) {
			reachable++
		}
	}
	voters = c.Len()
	return voters, reachable, voters > 0 && reachable >= QuorumSize(voters)
}

// Compare orders configurations by version, (Term, Index): Raft's "last log
// term, then last log index" comparison. It returns -1, 0 or +1.
func (c Configuration) Compare(o Configuration) int {
	switch {
	case c.Term != o.Term:
		if c.Term < o.Term {
			return -1
		}
		return 1
	case c.Index != o.Index:
		if c.Index < o.Index {
			return -1
		}
		return 1
	}
	return 0
}

// String renders c as "t.i[a,b,c]".
func (c Configuration) String() string {
	return fmt.Sprintf("%d.%d[%s]", c.Term, c.Index, c.Voters)
}
