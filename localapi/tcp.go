package localapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
)

// readOnlyPaths are the only paths ServeReadOnly answers: what a
// Prometheus server scrapes and what a load balancer's probe asks. Nothing
// that changes the agent may be here, since a TCP caller has no kernel-named
// identity (the socket's SO_PEERCRED check cannot apply).
var readOnlyPaths = map[string]bool{
	api.PathMetrics: true,
	api.PathHealth:  true,
}

// ReadOnlyPaths returns the paths ServeReadOnly answers, for tests and docs.
func ReadOnlyPaths() []string {
	return []string{api.PathHealth, api.PathMetrics}
}

// readOnly is the handler behind ServeReadOnly: known read-only paths go
// through the socket's own dispatch (same method checks, limits and
// counters); every other path is a 404 whatever the method, so a resign
// attempt over TCP learns nothing about the socket's endpoints.
type readOnly struct{ s *Server }

func (h readOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !readOnlyPaths[r.URL.Path] {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%q is not served over TCP: only %s and %s are; the rest of the API is on the agent's Unix socket", r.URL.Path, api.PathMetrics, api.PathHealth))
		return
	}
	h.s.ServeHTTP(w, r)
}

// ServeReadOnly answers GET /metrics and GET /v1/health on ln (a TCP
// listener, [metrics] listen) until Shutdown, which stops it with the
// socket. It returns nil after Shutdown and the accept error otherwise.
// The /metrics endpoint must have been given in Options.Metrics.
func (s *Server) ServeReadOnly(ln net.Listener) error {
	s.mu.Lock()
	if s.roHTTP != nil {
		s.mu.Unlock()
		return errors.New("localapi: ServeReadOnly called twice")
	}
	select {
	case <-s.done:
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	default:
	}
	errLog, _ := zap.NewStdLogAt(s.log, zap.DebugLevel)
	s.roHTTP = &http.Server{
		Handler:           readOnly{s},
		ReadHeaderTimeout: ReadHeaderTimeout,
		// No streams here: the whole exchange is bounded.
		ReadTimeout:    ReadHeaderTimeout,
		WriteTimeout:   s.timeout,
		IdleTimeout:    IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       errLog,
	}
	srv := s.roHTTP
	s.mu.Unlock()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("localapi: serve metrics over TCP: %w", err)
	}
	return nil
}
