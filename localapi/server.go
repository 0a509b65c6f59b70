package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
)

// Backend is what the server needs from the agent. The agent implements it;
// tests use a fake. Methods are called from request goroutines, concurrently;
// each must honour ctx and return promptly (the server bounds every call
// with Options.RequestTimeout).
//
// Status and Resign, like MaintBackend.SetMaint and VoterBackend's
// methods, act on one election: the one ElectionFrom(ctx) names
// (api.DefaultElection for the unprefixed paths). For an election the
// agent does not run they return an error wrapping ErrNoElection. A
// backend that runs named elections implements ElectionsBackend too;
// without it the server asks about the default election only. Members and
// Health are the agent's, whatever the election.
type Backend interface {
	// Status returns the agent's status now. With consistent, the agent
	// first confirms its leadership with a quorum; a protocol that cannot
	// returns an error wrapping ErrConsistentUnsupported.
	Status(ctx context.Context, consistent bool) (api.Status, error)
	// Members returns every known member.
	Members(ctx context.Context) ([]api.Member, error)
	// Resign asks this node to hand leadership over. It returns an error
	// wrapping ErrNotLeader when the node does not lead.
	Resign(ctx context.Context) error
	// Health returns nil while the agent runs its event loop.
	Health(ctx context.Context) error
}

// Limits of the server, chosen for a local control API whose requests are
// a line of text and whose answers are a few hundred bytes.
const (
	// MaxHeaderBytes bounds request headers (net/http adds 4 KiB of slack).
	MaxHeaderBytes = 16 << 10
	// MaxBodyBytes bounds request bodies; no endpoint needs one, so larger
	// declared bodies are refused before anything is read.
	MaxBodyBytes = 64 << 10
	// ReadHeaderTimeout closes connections that do not send a request line
	// and headers in time (slowloris, idle half-open connections).
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes kept-alive connections between requests.
	IdleTimeout = 2 * time.Minute
	// DefaultRequestTimeout bounds each Backend call, the reading of a
	// request body and the writing of an answer (Options.RequestTimeout).
	DefaultRequestTimeout = 10 * time.Second
	// watchWriteTimeout bounds one write to a watch stream: a client that
	// stops reading is dropped instead of holding a goroutine forever.
	watchWriteTimeout = 10 * time.Second
)

// Options configures a Server.
type Options struct {
	// Backend answers the requests. Required.
	Backend Backend
	// Hub feeds /v1/watch and wakes blocking /v1/leader queries, per
	// election (Hub.PublishTo). Required.
	Hub *Hub
	// Metrics serves /metrics (e.g. promhttp.Handler()); nil → 404.
	Metrics http.Handler
	// Logger receives request errors (warn) and the HTTP server's own
	// complaints (debug); nil discards them. The agent passes its own.
	Logger *zap.Logger
	// RequestTimeout overrides DefaultRequestTimeout when positive.
	RequestTimeout time.Duration
	// MaxConnections bounds the connections open at once; beyond it a
	// connection gets a 503 and is closed. Zero: DefaultMaxConnections.
	MaxConnections int
	// MaxWatchers bounds the /v1/watch streams open at once; beyond it the
	// request gets a 503. Zero: DefaultMaxWatchers.
	MaxWatchers int
	// WriteGroup names a group (or a numeric gid) whose members may change
	// the agent (resign, maint, voter changes) besides root and the agent's
	// own user (api.write_group). Empty: nobody else.
	WriteGroup string
}

type handler struct {
	method string // the only method allowed
	post   bool   // POST is allowed too (a GET endpoint that also changes)
	body   bool   // reads its own (bounded) body; others have theirs drained
	serve  func(w http.ResponseWriter, r *http.Request) error
	stream bool // sets its own write deadlines
	// write marks an endpoint whose POST changes the agent: the caller
	// needs write permission, and every attempt is audited.
	write bool
	// secret marks an endpoint whose every method needs write permission
	// (its answers hold secrets), audited like a write.
	secret bool
	// routine marks a write made many times a minute by design (a
	// session's check-in): its successes are counted but not logged.
	routine bool
}

// Server is the socket API. Create it with New, then Serve a listener from
// Listen; it is also an http.Handler for tests.
type Server struct {
	backend  Backend
	hub      *Hub
	log      *zap.Logger
	timeout  time.Duration
	handlers map[string]handler // keyed by path, tailscale style
	counts   counters
	writes   counters // by path and outcome ("ok", "failed", "denied")
	limits   limits
	access   access

	done     chan struct{} // closed by Shutdown: ends streams and waits
	doneOnce sync.Once

	mu     sync.Mutex
	http   *http.Server
	roHTTP *http.Server // ServeReadOnly's, when serving
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil || opts.Hub == nil {
		return nil, errors.New("localapi: Options.Backend and Options.Hub are required")
	}
	s := &Server{
		backend: opts.Backend,
		hub:     opts.Hub,
		log:     opts.Logger,
		timeout: opts.RequestTimeout,
		done:    make(chan struct{}),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultRequestTimeout
	}
	s.limits.maxConns, s.limits.maxWatchers = int64(opts.MaxConnections), int64(opts.MaxWatchers)
	if s.limits.maxConns <= 0 {
		s.limits.maxConns = DefaultMaxConnections
	}
	if s.limits.maxWatchers <= 0 {
		s.limits.maxWatchers = DefaultMaxWatchers
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	var err error
	if s.access, err = newAccess(opts.WriteGroup); err != nil {
		return nil, err
	}
	s.handlers = map[string]handler{
		api.PathStatus:  {method: http.MethodGet, serve: s.serveStatus},
		api.PathLeader:  {method: http.MethodGet, serve: s.serveLeader, stream: true},
		api.PathWatch:   {method: http.MethodGet, serve: s.serveWatch, stream: true},
		api.PathMembers: {method: http.MethodGet, serve: s.serveMembers},
		api.PathResign:  {method: http.MethodPost, serve: s.serveResign, write: true},
		api.PathHealth:  {method: http.MethodGet, serve: s.serveHealth},

		api.PathElections: {method: http.MethodGet, serve: s.serveElections},
	}
	s.addMaint(opts.Backend)
	s.addVoters(opts.Backend)
	s.addKeys(opts.Backend)
	s.addSessions(opts.Backend)
	if opts.Metrics != nil {
		m := opts.Metrics
		s.handlers[api.PathMetrics] = handler{method: http.MethodGet, serve: func(w http.ResponseWriter, r *http.Request) error {
			m.ServeHTTP(w, r)
			return nil
		}}
	}
	return s, nil
}

// ServeHTTP dispatches a request by path, checks its method and size,
// counts it, and turns handler errors into {"error": …} answers. A path
// under api.PathElections reaches the handler of the unprefixed path with
// the election in the request's context (ElectionFrom).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, election, label, routeCode, routeErr := s.route(r.URL.Path)
	h, known := s.handlers[key]
	if !known {
		label = "other" // bounded label cardinality for metrics
	}
	rec := &recorder{ResponseWriter: w}
	defer func() { s.counts.inc(label, rec.code()) }()
	r = r.WithContext(WithElection(r.Context(), election))

	switch {
	case routeErr != "":
		writeError(rec, routeCode, routeErr)
		return
	case !known:
		writeError(rec, http.StatusNotFound, fmt.Sprintf("no such endpoint %q", r.URL.Path))
		return
	case r.Method != h.method && !(h.method == http.MethodGet && r.Method == http.MethodHead) && !(h.post && r.Method == http.MethodPost):
		rec.Header().Set("Allow", h.allow())
		writeError(rec, http.StatusMethodNotAllowed, fmt.Sprintf("%s needs %s, not %s", r.URL.Path, h.allow(), r.Method))
		return
	case r.ContentLength > MaxBodyBytes:
		writeError(rec, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
		return
	}
	if (h.write && r.Method == http.MethodPost) || h.secret {
		p, hasPeer := peerOf(r.Context())
		if err := s.access.mayWrite(p, hasPeer); err != nil {
			writeError(rec, http.StatusForbidden, fmt.Sprintf("%s: %v", r.URL.Path, err))
			s.audit(r, label, p, hasPeer, rec.code(), err)
			return
		}
		if h.stream {
			s.auditStreamOpened(r, p, hasPeer)
		}
		var serveErr error
		defer func() {
			if h.routine && serveErr == nil && rec.code() < 400 {
				s.writes.inc(label, 0)
				return
			}
			s.audit(r, label, p, hasPeer, rec.code(), serveErr)
		}()
		h.serve = recordErr(h.serve, &serveErr)
	}
	if r.ContentLength != 0 && !h.body {
		// Only body endpoints use one, but clients may send one ("{}" on a
		// POST). Read it now, bounded in size and time, before acting:
		// left unread, net/http would try to drain it after the handler
		// and wait forever for a client that never sends it.
		if err := s.drainBody(rec, r); err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge
			}
			writeError(rec, code, "reading request body: "+err.Error())
			return
		}
	}
	if !h.stream {
		_ = http.NewResponseController(rec).SetWriteDeadline(time.Now().Add(s.timeout))
	}
	if err := h.serve(rec, r); err != nil {
		code := statusFor(err)
		if code >= 500 {
			s.log.Warn("localapi request failed", zap.String("path", r.URL.Path), zap.Int("code", code), zap.Error(err))
		}
		if rec.wrote {
			return // a stream already started; nothing more can be said
		}
		msg := err.Error()
		if errors.Is(err, ErrNoElection) {
			msg = noElection(election) // say how to list them, whatever the backend said
		}
		writeError(rec, code, msg)
	}
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) error {
	consistent, err := boolParam(r, api.ParamConsistent)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	st, err := s.backend.Status(ctx, consistent)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	writeJSON(w, http.StatusOK, named(st, ElectionFrom(r.Context())))
	return nil
}

func (s *Server) serveMembers(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	ms, err := s.backend.Members(ctx)
	if err != nil {
		return fmt.Errorf("members: %w", err)
	}
	out := make([]api.Member, len(ms)) // never null on the wire
	for i, m := range ms {
		// JSON has no infinity or NaN: encoding would fail mid-answer.
		switch {
		case math.IsNaN(m.Phi):
			m.Phi = 0
		case m.Phi > api.MaxPhi:
			m.Phi = api.MaxPhi
		}
		out[i] = m
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) serveResign(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if err := s.backend.Resign(ctx); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	writeJSON(w, http.StatusOK, api.Resigned{Resigned: true})
	return nil
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if err := s.backend.Health(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
	return nil
}

// serveLeader answers at once without ParamIndex; with it, it blocks until
// the epoch exceeds the index, the wait ends, or the server shuts down, and
// then answers with the leader at that moment (Consul blocking query).
func (s *Server) serveLeader(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var index uint64
	blocking := q.Has(api.ParamIndex)
	if blocking {
		var err error
		index, err = strconv.ParseUint(q.Get(api.ParamIndex), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s must be a decimal epoch, got %q", errBadRequest, api.ParamIndex, q.Get(api.ParamIndex))
		}
	}
	wait := api.DefaultWait
	if q.Has(api.ParamWait) {
		d, err := time.ParseDuration(q.Get(api.ParamWait))
		if err != nil || d < 0 {
			return fmt.Errorf("%w: %s must be a non-negative duration such as \"30s\", got %q", errBadRequest, api.ParamWait, q.Get(api.ParamWait))
		}
		wait = min(d, api.MaxWait)
	}
	if !blocking {
		wait = 0
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(wait + s.timeout))

	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Take the wake-up channel before asking the backend, so a change
		// between the two wakes us instead of being missed.
		changed, hubClosed := s.hub.wakeup(ElectionFrom(r.Context()))
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		st, err := s.backend.Status(ctx, false)
		cancel()
		if err != nil {
			return fmt.Errorf("leader: %w", err)
		}
		if !blocking || st.Epoch > index {
			writeJSON(w, http.StatusOK, st.LeaderInfo())
			return nil
		}
		if hubClosed {
			// The agent is stopping: no change will come; answer now.
			writeJSON(w, http.StatusOK, st.LeaderInfo())
			return nil
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-s.done:
		case <-r.Context().Done():
			return nil // the client left; nobody to answer
		}
		// Time is up: answer with the current leader, like Consul.
		ctx, cancel = context.WithTimeout(r.Context(), s.timeout)
		st, err = s.backend.Status(ctx, false)
		cancel()
		if err != nil {
			return fmt.Errorf("leader: %w", err)
		}
		writeJSON(w, http.StatusOK, st.LeaderInfo())
		return nil
	}
}

// serveWatch streams the current status and then every change as NDJSON.
// When the hub closes the subscription (lag, shutdown) the last line is an
// api.Error saying why.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request) error {
	if !s.limits.acquireWatcher() {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many watchers: the agent serves at most %d watch streams at once (api.max_watchers)", s.limits.maxWatchers))
		return nil
	}
	defer s.limits.releaseWatcher()
	election := ElectionFrom(r.Context())
	// The hub streams any name it is given; the backend knows which
	// elections exist. Asked first, an unknown one is a 404, not a stream
	// that never says anything.
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	_, err := s.backend.Status(ctx, false)
	cancel()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	sub := s.hub.SubscribeTo(election)
	defer sub.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	enc := json.NewEncoder(w)
	send := func(v any) error {
		if err := rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		return rc.Flush()
	}
	for {
		select {
		case st, ok := <-sub.C():
			if !ok {
				if err := sub.Err(); err != nil {
					return send(api.Error{Error: err.Error()})
				}
				return nil
			}
			if err := send(named(st, election)); err != nil {
				return err
			}
		case <-s.done:
			return send(api.Error{Error: ErrHubClosed.Error()})
		case <-r.Context().Done():
			return nil
		}
	}
}

// Serve answers requests on ln until Shutdown. It returns nil after
// Shutdown and the accept error otherwise.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.http != nil {
		s.mu.Unlock()
		return errors.New("localapi: Serve called twice")
	}
	select {
	case <-s.done:
		// Shutdown came first (it found no server to stop): serving now
		// would never end.
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	default:
	}
	// The HTTP server's own complaints (a client hanging up mid-request and
	// the like) are the clients' business: debug level. NewStdLogAt fails
	// only for a level zap does not know.
	errLog, _ := zap.NewStdLogAt(s.log, zap.DebugLevel)
	s.http = &http.Server{
		Handler:           s,
		ConnContext:       connContext,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// No ReadTimeout/WriteTimeout: they would cut watch streams and
		// blocking queries; ServeHTTP sets per-request write deadlines.
		ErrorLog: errLog,
	}
	srv := s.http
	s.mu.Unlock()
	if err := srv.Serve(&limitListener{Listener: ln, l: &s.limits}); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("localapi: serve: %w", err)
	}
	return nil
}

// Shutdown ends watch streams and blocking queries (each gets a final
// answer), stops accepting on the socket and on ServeReadOnly's listener,
// and waits for requests in flight until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.doneOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	srvs := []*http.Server{s.http, s.roHTTP}
	s.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("localapi: shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// drainBody reads and discards r's body under a read deadline, then clears
// the deadline: a deadline left set would cancel the context of a long
// watch or blocking query when net/http's background read hits it.
func (s *Server) drainBody(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.timeout)); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return err
	}
	return rc.SetReadDeadline(time.Time{})
}

func boolParam(r *http.Request, name string) (bool, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return false, nil
	}
	v := q.Get(name)
	if v == "" {
		return true, nil // "?consistent" alone, as in Consul
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s must be true or false, got %q", errBadRequest, name, v)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(api.Error{Error: "encoding answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg})
}

// recorder remembers the status code for the request counters.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) code() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.status
}
