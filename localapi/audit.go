package localapi

import (
	"net/http"

	"go.uber.org/zap"
)

// Outcomes of a write, the label of WriteCounts.
const (
	// OutcomeOK: the write was allowed and done.
	OutcomeOK = "ok"
	// OutcomeFailed: the write was allowed but did not succeed (not the
	// leader, a refused voter change, a bad request).
	OutcomeFailed = "failed"
	// OutcomeDenied: the caller may not write.
	OutcomeDenied = "denied"
)

// WriteCounts returns how many writes (resign, maint, voter changes) each
// path saw, by outcome, sorted by path. The agent exports it as
// conclave_localapi_writes_total{path,outcome}.
func (s *Server) WriteCounts() []WriteCount {
	out := []WriteCount{}
	for _, c := range s.writes.snapshot() {
		out = append(out, WriteCount{Path: c.Path, Outcome: outcomes[c.Code], Count: c.Count})
	}
	return out
}

// WriteCount is the number of writes on one path with one outcome.
type WriteCount struct {
	Path    string
	Outcome string
	Count   uint64
}

// outcomes index the write counters, which reuse the request counters'
// (path, int) key.
var outcomes = []string{OutcomeOK, OutcomeFailed, OutcomeDenied}

// audit logs one write attempt with the caller the kernel named and what
// became of it, and counts it: who moved leadership must be answerable
// after the fact. label is the request's metrics label: the counter is
// kept per endpoint, never per election name a caller made up.
func (s *Server) audit(r *http.Request, label string, p peer, hasPeer bool, code int, err error) {
	outcome := 0
	switch {
	case code == http.StatusForbidden:
		outcome = 2
	case code >= 400 || err != nil:
		outcome = 1
	}
	s.writes.inc(label, outcome)
	fields := []zap.Field{
		zap.String("path", r.URL.Path),
		zap.String("query", r.URL.RawQuery),
		zap.String("outcome", outcomes[outcome]),
		zap.Int("code", code),
	}
	fields = append(fields, callerFields(p, hasPeer)...)
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	s.log.Info("audit: socket write", fields...)
}

// recordErr wraps a handler's serve function to keep its error for the
// audit line.
func recordErr(serve func(http.ResponseWriter, *http.Request) error, errp *error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		err := serve(w, r)
		*errp = err
		return err
	}
}

// auditStreamOpened logs a write that holds its stream open (a session's
// campaign) as it starts: its audit line proper comes when it ends, which
// may be days later, and who holds leadership now must be answerable now.
func (s *Server) auditStreamOpened(r *http.Request, p peer, hasPeer bool) {
	fields := append([]zap.Field{zap.String("path", r.URL.Path)}, callerFields(p, hasPeer)...)
	s.log.Info("audit: socket write stream opened", fields...)
}

// callerFields name the caller the kernel reported.
func callerFields(p peer, hasPeer bool) []zap.Field {
	switch {
	case !hasPeer:
		return []zap.Field{zap.String("caller", "in-process")}
	case !p.known:
		return []zap.Field{zap.String("caller", "unknown")}
	}
	return []zap.Field{zap.Uint32("uid", p.uid), zap.Uint32("gid", p.gid), zap.Int32("pid", p.pid)}
}
