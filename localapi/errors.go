package localapi

import (
	"context"
	"errors"
	"net/http"
)

// Errors a Backend returns (possibly wrapped, with more detail) to select
// the HTTP status of the answer. Any other error is a 500.
var (
	// ErrNotLeader: Resign on a node that does not lead → 409 Conflict.
	ErrNotLeader = errors.New("not the leader")
	// ErrConsistentUnsupported: a consistent Status was asked of a protocol
	// that cannot confirm leadership with a quorum (bully, ring) → 400.
	ErrConsistentUnsupported = errors.New("consistent reads are not supported by this election protocol")
	// ErrUnavailable: the agent cannot answer now (stopping, no quorum for
	// a consistent read) → 503 Service Unavailable.
	ErrUnavailable = errors.New("agent unavailable")
)

// errBadRequest marks the server's own parameter errors → 400.
var errBadRequest = errors.New("bad request")

// statusFor maps an error to the HTTP status of its answer.
func statusFor(err error) int {
	switch {
	case errors.Is(err, errBadRequest), errors.Is(err, ErrConsistentUnsupported):
		return http.StatusBadRequest
	case errors.Is(err, ErrNoElection):
		return http.StatusNotFound
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrRefused), errors.Is(err, ErrNoSessions), errors.Is(err, ErrNotCandidate), errors.Is(err, ErrKeysRefused):
		return http.StatusConflict
	case errors.Is(err, ErrSessionEnded):
		return http.StatusGone
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrTooManySessions):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}
