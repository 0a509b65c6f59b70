package api

import (
	"errors"
	"fmt"
	"strings"
)

// Named elections. One agent may run several elections, each a table
// [elections.NAME] of its configuration; the old [election] table is the
// election named DefaultElection. Every per-election endpoint answers under
// PathElections/NAME (ElectionPath), and the unprefixed paths (PathStatus,
// PathLeader, …) keep meaning DefaultElection, so clients written before
// named elections keep working unchanged.

// PathElections: GET → []Election, every election this agent runs, sorted
// by name. Under it, PathElections/NAME/status, /leader, /watch, /resign,
// /maint, /voters, /campaign and /heartbeat answer exactly as PathStatus,
// PathLeader, PathWatch, PathResign, PathMaint, PathVoters, PathCampaign
// and PathHeartbeat do (same methods, query parameters,
// bodies, answers and permissions), for election NAME: 404 with Error when
// this agent runs no such election, 400 when NAME is not a valid name
// (ValidElectionName).
const PathElections = "/v1/elections"

// DefaultElection is the name of the election of the [election] table, the
// one the unprefixed paths act on.
const DefaultElection = "default"

// MaxElectionName bounds an election's name, in bytes.
const MaxElectionName = 32

// ElectionPaths returns the paths that act on one election, and so also
// answer under PathElections/NAME (ElectionPath). The others (PathMembers,
// PathHealth, PathKeys, PathMetrics) are the agent's, shared by all its
// elections.
func ElectionPaths() []string {
	return []string{PathStatus, PathLeader, PathWatch, PathResign, PathMaint, PathVoters, PathCampaign, PathHeartbeat}
}

// errElectionName is wrapped by CheckElectionName's errors.
var errElectionName = errors.New("invalid election name")

// CheckElectionName returns nil when name is a valid election name, and
// otherwise an error saying what is wrong with it: a name is 1 to
// MaxElectionName bytes of a-z, 0-9, '_' and '-', starting with a letter.
// The rule keeps names safe in a URL path, a file name, a metric label and
// a TOML bare key without escaping. The configuration and the socket API
// both check names with it, so the two cannot disagree.
func CheckElectionName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", errElectionName)
	case len(name) > MaxElectionName:
		return fmt.Errorf("%w %.40q…: %d bytes, at most %d", errElectionName, name, len(name), MaxElectionName)
	case name[0] < 'a' || name[0] > 'z':
		return fmt.Errorf("%w %q: it must start with a lower-case letter a-z", errElectionName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return fmt.Errorf("%w %q: %q is not allowed; use a-z, 0-9, '_' and '-'", errElectionName, name, rune(c))
		}
	}
	return nil
}

// ValidElectionName reports whether name is a valid election name
// (CheckElectionName says why not).
func ValidElectionName(name string) bool { return CheckElectionName(name) == nil }

// ElectionPath returns the path that acts on election name for p, one of
// ElectionPaths: PathElections/NAME/status for PathStatus, and so on. For
// DefaultElection and for "" it returns p itself, which means the same
// and which agents from before named elections answer too. It does not
// check name (CheckElectionName does).
func ElectionPath(name, p string) string {
	if name == "" || name == DefaultElection {
		return p
	}
	return PathElections + "/" + name + "/" + strings.TrimPrefix(p, "/v1/")
}

// SplitElectionPath undoes ElectionPath for a path under PathElections:
// "/v1/elections/a/status" is ("a", PathStatus, true). ok is false for a
// path not of the form PathElections/NAME/REST; name is returned unchecked
// and p may be no path of ElectionPaths (the server answers 400 or 404).
func SplitElectionPath(path string) (name, p string, ok bool) {
	rest, found := strings.CutPrefix(path, PathElections+"/")
	if !found {
		return "", "", false
	}
	name, tail, found := strings.Cut(rest, "/")
	if !found || tail == "" {
		return "", "", false
	}
	return name, "/v1/" + tail, true
}

// Election is one item of the PathElections list: the status of one
// election this agent runs, exactly what PathStatus of that election
// answers at the same instant (Status.Election names it; Role, Leader,
// Epoch, Lease, Health and its Maintenance are that election's), so the
// list and the per-election status cannot disagree. It is a type of its
// own so that fields only the list has may be added later; on the wire it
// is a Status object.
type Election struct {
	Status
}
