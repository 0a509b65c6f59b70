package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// VoterBackend is implemented by backends that can show and change the
// voter set (the agent, for every protocol: a protocol without voters
// answers with an error wrapping ErrNoVoters). A Backend without it has no
// PathVoters endpoint.
type VoterBackend interface {
	// Voters returns the voter configuration this agent holds.
	Voters(ctx context.Context) (api.Voters, error)
	// ChangeVoters adds or removes one voter and returns once the change
	// is committed, with the configuration that committed it. A change
	// that cannot be made returns an error wrapping ErrRefused (the
	// leader said no), ErrUnavailable (no leader, or it did not answer)
	// or ErrNoVoters.
	ChangeVoters(ctx context.Context, c api.VoterChange) (api.Voters, error)
}

// Errors of PathVoters, besides ErrUnavailable and ErrForbidden.
var (
	// ErrRefused: the leader refused the change (one in flight, unknown
	// member, the quorum would be lost) → 409 Conflict.
	ErrRefused = errors.New("voter change refused")
	// ErrNoVoters: the election protocol has no voter set → 400.
	ErrNoVoters = fmt.Errorf("%w: this election protocol has no voter set; only majority has one", errBadRequest)
)

// maxVoterChangeBytes bounds the body of a voter change: {"add": NAME}
// with a name of at most 64 bytes.
const maxVoterChangeBytes = 1 << 10

// addVoters registers PathVoters when the backend implements VoterBackend.
func (s *Server) addVoters(b Backend) {
	vb, ok := b.(VoterBackend)
	if !ok {
		return
	}
	s.handlers[api.PathVoters] = handler{method: http.MethodGet, post: true, body: true, write: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodPost {
			return s.serveChangeVoters(vb, w, r)
		}
		if r.ContentLength != 0 {
			if err := s.drainBody(w, r); err != nil {
				return fmt.Errorf("%w: reading request body: %v", errBadRequest, err)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		v, err := vb.Voters(ctx)
		if err != nil {
			return fmt.Errorf("voters: %w", err)
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}}
}

func (s *Server) serveChangeVoters(vb VoterBackend, w http.ResponseWriter, r *http.Request) error {
	c, err := s.readVoterChange(w, r)
	if err != nil {
		return fmt.Errorf("voters: %w", err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	v, err := vb.ChangeVoters(ctx, c)
	if err != nil {
		return fmt.Errorf("voters: %w", err)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// readVoterChange reads and checks a VoterChange body, bounded in size and
// time.
func (s *Server) readVoterChange(w http.ResponseWriter, r *http.Request) (api.VoterChange, error) {
	var c api.VoterChange
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxVoterChangeBytes))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return c, fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: the body must be {\"add\": NAME} or {\"remove\": NAME}: %v", errBadRequest, err)
	}
	if dec.More() {
		return c, fmt.Errorf("%w: more than one JSON value in the body", errBadRequest)
	}
	if (c.Add == "") == (c.Remove == "") {
		return c, fmt.Errorf("%w: name exactly one member, as {\"add\": NAME} or {\"remove\": NAME}", errBadRequest)
	}
	return c, nil
}

// allow is the Allow header of a 405 answer for h.
func (h handler) allow() string {
	if h.post && h.method != http.MethodPost {
		return h.method + ", " + http.MethodPost
	}
	return h.method
}
