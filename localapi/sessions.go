package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
)

// SessionBackend is implemented by backends whose elections may hold
// their candidacy by sessions (api.PathCampaign, api.PathHeartbeat); the
// endpoints exist only for them. Each method acts on the election
// ElectionFrom(ctx) names.
type SessionBackend interface {
	// OpenSession opens a session: while it is open (and kept within
	// its TTL) this agent stands in the election. It returns an error
	// wrapping ErrNoSessions, ErrNotCandidate or ErrTooManySessions when
	// it cannot.
	OpenSession(ctx context.Context) (Session, error)
	// KeepSession checks in for the session id; an error wrapping
	// ErrSessionEnded when it ended.
	KeepSession(ctx context.Context, id string) error
	// CloseSession ends the session id; closing one that already ended
	// changes nothing and is no error.
	CloseSession(ctx context.Context, id string) error
}

// Session is an open session, as SessionBackend.OpenSession returns it.
type Session struct {
	// ID names the session for KeepSession and CloseSession. It is
	// opaque and never names a session of an earlier agent process.
	ID string
	// TTL is how long the session lives without a check-in; zero: no
	// check-in is needed.
	TTL time.Duration
	// Wait blocks until the agent ends the session and returns why
	// (api.SessionExpired, api.SessionStopped), or until ctx ends ("").
	// It is called at most once.
	Wait func(ctx context.Context) string
}

// Session errors, besides ErrNoElection, ErrUnavailable and ErrForbidden.
var (
	// ErrNoSessions: the election's candidacy is not held by sessions → 409.
	ErrNoSessions = errors.New("candidacy is not held by sessions")
	// ErrNotCandidate: this agent can never lead the election (majority:
	// it is not a voter), so a session would hold nothing → 409.
	ErrNotCandidate = errors.New("not a candidate")
	// ErrSessionEnded: the session was closed, expired, or belongs to an
	// earlier agent process → 410 Gone; its holder must campaign again.
	ErrSessionEnded = errors.New("the session ended")
	// ErrTooManySessions: the election has its most sessions open → 503.
	ErrTooManySessions = errors.New("too many sessions open")
)

// addSessions registers api.PathCampaign and api.PathHeartbeat when the
// backend implements SessionBackend.
func (s *Server) addSessions(b Backend) {
	sb, ok := b.(SessionBackend)
	if !ok {
		return
	}
	s.handlers[api.PathCampaign] = handler{method: http.MethodPost, write: true, stream: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		return s.serveCampaign(w, r, sb)
	}}
	// A holder checks in every half TTL: a successful check-in is counted
	// but not logged, or the audit log would be mostly heartbeats; the
	// campaign that opened the session is.
	s.handlers[api.PathHeartbeat] = handler{method: http.MethodPost, write: true, routine: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		return s.serveHeartbeat(w, r, sb)
	}}
}

// serveCampaign opens a session and holds it for as long as the client
// keeps the connection open, streaming the election's status meanwhile.
// A campaign is a stream like a watch and takes one of the watcher slots
// (api.max_watchers), so the streams of both kinds together stay bounded;
// the core bounds the sessions of each election (MaxSessions in core).
func (s *Server) serveCampaign(w http.ResponseWriter, r *http.Request, sb SessionBackend) error {
	if !s.limits.acquireWatcher() {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many streams: the agent serves at most %d watch and campaign streams at once (api.max_watchers)", s.limits.maxWatchers))
		return nil
	}
	defer s.limits.releaseWatcher()
	election := ElectionFrom(r.Context())
	// Subscribe before opening, so that the status the session brings
	// about (this agent standing, then leading) is never missed.
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	_, err := s.backend.Status(ctx, false)
	cancel()
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	sub := s.hub.SubscribeTo(election)
	defer sub.Close()
	ctx, cancel = context.WithTimeout(r.Context(), s.timeout)
	sess, err := sb.OpenSession(ctx)
	cancel()
	if err != nil {
		if errors.Is(err, ErrTooManySessions) {
			w.Header().Set("Retry-After", "1")
		}
		return fmt.Errorf("campaign: %w", campaignError(err, election))
	}
	// Whatever ends the stream, the session ends with it: the client
	// hung up, a write failed, the agent ended the session or stops.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		if err := sb.CloseSession(WithElection(ctx, election), sess.ID); err != nil && !errors.Is(err, ErrUnavailable) {
			s.log.Warn("closing a session after its campaign ended", zap.String("session", sess.ID), zap.Error(err))
		}
	}()
	// The wait ends with the request: no goroutine outlives it.
	wctx, stopWait := context.WithCancel(r.Context())
	defer stopWait()
	ended := make(chan string, 1)
	go func() { ended <- sess.Wait(wctx) }()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(v any) error {
		if err := rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
		return rc.Flush()
	}
	if err := send(openedLine{Election: election, Session: sess.ID, TTLMS: sess.TTL.Milliseconds()}); err != nil {
		return err
	}
	for {
		select {
		case st, ok := <-sub.C():
			if !ok {
				why := "the agent ended the stream"
				if err := sub.Err(); err != nil {
					why = err.Error()
				}
				return send(endedLine{Ended: api.SessionClosed, Error: "session closed: " + why})
			}
			if err := send(named(st, election)); err != nil {
				return err
			}
		case why := <-ended:
			if why == "" {
				return nil // the client left
			}
			return send(endLine(why, sess.TTL))
		case <-s.done:
			return send(endLine(api.SessionStopped, sess.TTL))
		case <-r.Context().Done():
			return nil
		}
	}
}

// openedLine and endedLine are a campaign's first and last lines: the
// fields of api.CampaignLine they set, without a status's.
type openedLine struct {
	Election string `json:"election"`
	Session  string `json:"session"`
	TTLMS    int64  `json:"ttl_ms"`
}

type endedLine struct {
	Ended string `json:"ended"`
	Error string `json:"error"`
}

// endLine is the last line of a campaign that the agent ended.
func endLine(why string, ttl time.Duration) endedLine {
	l := endedLine{Ended: why}
	switch why {
	case api.SessionExpired:
		l.Error = fmt.Sprintf("session expired: its holder did not check in within session_ttl (%s); campaign again", ttl)
	case api.SessionStopped:
		l.Error = "session ended: the agent is stopping; campaign again once it is back"
	default:
		l.Error = "session closed"
	}
	return l
}

// campaignError says what to do about a refused session.
func campaignError(err error, election string) error {
	switch {
	case errors.Is(err, ErrNoSessions):
		return fmt.Errorf("election %s's %w; set candidacy = \"session\" in its table to campaign on it", election, err)
	case errors.Is(err, ErrTooManySessions):
		return fmt.Errorf("%w on election %s; close one (end its campaign) or retry later", err, election)
	}
	return err
}

func (s *Server) serveHeartbeat(w http.ResponseWriter, r *http.Request, sb SessionBackend) error {
	id := r.URL.Query().Get(api.ParamSession)
	if id == "" {
		return fmt.Errorf("heartbeat: %w: %s is required: the session the first line of %s named", errBadRequest, api.ParamSession, api.PathCampaign)
	}
	if len(id) > maxSessionID {
		return fmt.Errorf("heartbeat: %w: %s of %d bytes, at most %d", errBadRequest, api.ParamSession, len(id), maxSessionID)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if err := sb.KeepSession(ctx, id); err != nil {
		if errors.Is(err, ErrSessionEnded) {
			return fmt.Errorf("heartbeat: %w: session %s was closed, expired or belongs to an earlier agent process; campaign again", err, id)
		}
		return fmt.Errorf("heartbeat: %w", err)
	}
	writeJSON(w, http.StatusOK, api.Heartbeat{Session: id})
	return nil
}

// maxSessionID bounds a session id on the wire; the agent's are far
// shorter.
const maxSessionID = 64
