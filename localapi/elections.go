package localapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/conclave-agent/conclave/api"
)

// Named elections (api.PathElections). The server routes
// /v1/elections/NAME/REST to the handler of /v1/REST with NAME in the
// request's context, so every handler and every Backend method serves any
// election alike: the Backend reads the name with ElectionFrom and answers
// for that election, or with an error wrapping ErrNoElection.

// ErrNoElection: the agent runs no election of the name asked → 404, with
// a message saying how to list the elections. A Backend returns it
// (wrapped) from any method that acts on one election.
var ErrNoElection = errors.New("no such election")

// ElectionsBackend is implemented by backends that run named elections.
// Without it the server serves only api.DefaultElection: any other name is
// a 404 before the Backend is asked, so a backend that ignores
// ElectionFrom can never answer for an election it does not run, and
// api.PathElections lists the default election alone, from Status.
type ElectionsBackend interface {
	// Elections returns the status of every election the agent runs, each
	// with Status.Election set, sorted by name. Each item must be what
	// Status would answer for that election at that instant.
	Elections(ctx context.Context) ([]api.Election, error)
}

type electionKey struct{}

// WithElection returns ctx naming election as the one a request acts on.
// The server sets it on every request; tests of a Backend may set it too.
func WithElection(ctx context.Context, election string) context.Context {
	return context.WithValue(ctx, electionKey{}, election)
}

// ElectionFrom returns the election a request acts on: the NAME of an
// api.PathElections/NAME/… path, api.DefaultElection for the unprefixed
// paths (and for a context the server did not make).
func ElectionFrom(ctx context.Context) string {
	if e, ok := ctx.Value(electionKey{}).(string); ok && e != "" {
		return e
	}
	return api.DefaultElection
}

// noElection is the message of a 404 for election name.
func noElection(name string) string {
	return fmt.Sprintf("no election %q on this agent; `agent elections` (GET %s) lists them", name, api.PathElections)
}

// route resolves a request path to its handler's key, the election it
// acts on and the metrics label. A path under api.PathElections names an
// election: a bad name is a 400 and a path that acts on no single election
// a 404 (errMsg and code say which; key is "" then).
func (s *Server) route(path string) (key, election, label string, code int, errMsg string) {
	name, rest, ok := api.SplitElectionPath(path)
	if !ok {
		return path, api.DefaultElection, path, 0, ""
	}
	if err := api.CheckElectionName(name); err != nil {
		return "", "", "other", http.StatusBadRequest, fmt.Sprintf("%v (in the path %q)", err, path)
	}
	if !slices.Contains(api.ElectionPaths(), rest) {
		if _, known := s.handlers[rest]; known {
			return "", "", "other", http.StatusNotFound, fmt.Sprintf("%s belongs to the agent, not to one election: ask %s", rest, rest)
		}
		return "", "", "other", http.StatusNotFound, fmt.Sprintf("no such endpoint %q: an election answers %s under %s/NAME/",
			path, strings.Join(trimV1(api.ElectionPaths()), ", "), api.PathElections)
	}
	if _, known := s.handlers[rest]; !known {
		return "", "", "other", http.StatusNotFound, fmt.Sprintf("no such endpoint %q", path)
	}
	if _, named := s.backend.(ElectionsBackend); !named && name != api.DefaultElection {
		return "", "", "other", http.StatusNotFound, noElection(name)
	}
	// One label per endpoint, not per name: the metric's cardinality stays
	// bounded whatever names clients try.
	return rest, name, api.PathElections + "/{name}/" + strings.TrimPrefix(rest, "/v1/"), 0, ""
}

func trimV1(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.TrimPrefix(p, "/v1/")
	}
	return out
}

// serveElections answers api.PathElections: the backend's list, or, from a
// backend without named elections, its status as the one election.
func (s *Server) serveElections(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	var list []api.Election
	if eb, ok := s.backend.(ElectionsBackend); ok {
		var err error
		if list, err = eb.Elections(ctx); err != nil {
			return fmt.Errorf("elections: %w", err)
		}
	} else {
		st, err := s.backend.Status(WithElection(ctx, api.DefaultElection), false)
		if err != nil {
			return fmt.Errorf("elections: %w", err)
		}
		list = []api.Election{{Status: st}}
	}
	out := make([]api.Election, len(list)) // never null on the wire
	for i, e := range list {
		if e.Election == "" {
			e.Election = api.DefaultElection
		}
		out[i] = e
	}
	slices.SortFunc(out, func(a, b api.Election) int { return strings.Compare(a.Election, b.Election) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// named fills in st's election when the backend left it out, so that every
// status and watch line on the socket names its election.
func named(st api.Status, election string) api.Status {
	if st.Election == "" {
		st.Election = election
	}
	return st
}
