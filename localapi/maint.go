package localapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/conclave-agent/conclave/api"
)

// MaintBackend is implemented by backends that support maintenance mode
// (api.PathMaint); the endpoint exists only for them.
type MaintBackend interface {
	// SetMaint enters (on) or leaves maintenance, durably, and returns the
	// mode now in force. A bad reason is an error wrapping ErrBadMaint.
	SetMaint(ctx context.Context, on bool, reason string) (api.MaintResult, error)
}

// ErrBadMaint marks a refused maintenance request (a bad reason) → 400.
var ErrBadMaint = fmt.Errorf("maint: %w", errBadRequest)

func (s *Server) addMaint(b Backend) {
	mb, ok := b.(MaintBackend)
	if !ok {
		return
	}
	s.handlers[api.PathMaint] = handler{method: http.MethodPost, write: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		return s.serveMaint(w, r, mb)
	}}
}

// serveMaint changes maintenance mode: a write, like resign, since it
// moves leadership.
func (s *Server) serveMaint(w http.ResponseWriter, r *http.Request, mb MaintBackend) error {
	q := r.URL.Query()
	var on bool
	switch q.Get(api.ParamEnable) {
	case "true":
		on = true
	case "false":
	default:
		return fmt.Errorf("maint: %w: %s must be \"true\" or \"false\"", errBadRequest, api.ParamEnable)
	}
	reason := q.Get(api.ParamReason)
	if len(reason) > api.MaxMaintReason {
		return fmt.Errorf("maint: %w: reason of %d bytes, at most %d", errBadRequest, len(reason), api.MaxMaintReason)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	res, err := mb.SetMaint(ctx, on, reason)
	if err != nil {
		return fmt.Errorf("maint: %w", err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
