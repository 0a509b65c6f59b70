package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// ErrSessionEnded matches (errors.Is) the *Error of a 410 answer to
// Session.Heartbeat, and Session.Err once the session is over: it was
// closed, it expired, or the agent stopped. Campaign again to stand again.
var ErrSessionEnded = errors.New("session ended")

// Session is a session held open on an election whose candidacy is
// "session" (docs/elections.md): while it is open, and checked in within
// its TTL, the agent stands in the election. Campaign opens one; Close
// ends it. Its methods are safe for concurrent use.
type Session struct {
	c      *Client
	id     string
	ttl    time.Duration
	path   string // the heartbeat's
	body   io.ReadCloser
	cancel context.CancelFunc

	updates chan api.Status
	done    chan struct{}

	mu     sync.Mutex
	status api.Status
	err    error
	reason string
	closed bool
}

// Campaign opens a session on c's election (api.PathCampaign): the agent
// stands in it for as long as the session lives. The session ends when
// Close is called, when ctx ends, when the connection to the agent breaks,
// or when the agent ends it (its holder did not Heartbeat within TTL, or
// the agent stops); Done is closed then and Err says why. An election
// whose candidacy is not "session" answers with an *Error of status 409.
func (c *Client) Campaign(ctx context.Context) (*Session, error) {
	p, err := c.path(api.PathCampaign)
	if err != nil {
		return nil, err
	}
	hb, err := c.path(api.PathHeartbeat)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodPost, p, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		return nil, answerError(p, resp.StatusCode, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxWatchLine)
	first, err := readCampaignLine(sc, p)
	if err == nil && first.Session == "" {
		err = fmt.Errorf("agent %s: the first line names no session: %+v", p, first)
	}
	if err != nil {
		cancel()
		resp.Body.Close()
		return nil, err
	}
	s := &Session{
		c: c, id: first.Session, ttl: time.Duration(first.TTLMS) * time.Millisecond, path: hb,
		body: resp.Body, cancel: cancel,
		updates: make(chan api.Status, 16), done: make(chan struct{}),
	}
	go s.read(sc, p)
	return s, nil
}

func readCampaignLine(sc *bufio.Scanner, path string) (api.CampaignLine, error) {
	var l api.CampaignLine
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return l, fmt.Errorf("agent %s: %w", path, err)
		}
		return l, fmt.Errorf("agent %s: %w: the stream closed without a last line (is the agent stopping?)", path, ErrSessionEnded)
	}
	if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
		return l, fmt.Errorf("agent %s: decoding line: %w", path, err)
	}
	return l, nil
}

// read delivers the stream's status lines until its last line or its end.
func (s *Session) read(sc *bufio.Scanner, path string) {
	defer close(s.done)
	defer close(s.updates)
	for {
		l, err := readCampaignLine(sc, path)
		if err == nil && (l.Ended != "" || l.Error != "") {
			err = fmt.Errorf("agent %s: %w (%s): %s", path, ErrSessionEnded, l.Ended, l.Error)
		}
		if err != nil {
			s.mu.Lock()
			if s.closed {
				err = fmt.Errorf("agent %s: %w: closed by its holder", path, ErrSessionEnded)
				l.Ended = api.SessionClosed
			}
			s.err, s.reason = err, l.Ended
			s.mu.Unlock()
			s.cancel()
			s.body.Close()
			return
		}
		s.mu.Lock()
		s.status = l.Status
		s.mu.Unlock()
		// Keep the newest: a holder that does not read Updates must not
		// stall the stream, whose reading is what notices the end.
		select {
		case s.updates <- l.Status:
		default:
			select {
			case <-s.updates:
			default:
			}
			s.updates <- l.Status
		}
	}
}

// ID returns the session's id, as the agent named it.
func (s *Session) ID() string { return s.id }

// TTL returns the election's session_ttl: Heartbeat at least this often
// (every half of it, say) or the session expires. Zero: no check-in is
// needed.
func (s *Session) TTL() time.Duration { return s.ttl }

// Heartbeat checks in: the session lives another TTL. An error matching
// ErrSessionEnded means it is over; campaign again.
func (s *Session) Heartbeat(ctx context.Context) error {
	var hb api.Heartbeat
	return s.c.do(ctx, http.MethodPost, s.path, url.Values{api.ParamSession: {s.id}}, &hb)
}

// Updates returns the election's status lines while the session lives,
// the current one first, as Watch would; it is closed when the session
// ends. A reader that falls behind misses older lines, never the newest.
func (s *Session) Updates() <-chan api.Status { return s.updates }

// Status returns the newest status line the session brought.
func (s *Session) Status() api.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session lives and, once Done is closed, why it
// ended: an error matching ErrSessionEnded when the agent or Close ended
// it, or the error of the broken connection.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Reason returns why the agent ended the session (api.SessionExpired,
// api.SessionStopped, api.SessionClosed), "" while it lives or when the
// connection broke.
func (s *Session) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Close ends the session (the agent closes it when the connection does)
// and waits until the stream is done. It is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = s.err == nil
	s.mu.Unlock()
	s.cancel()
	err := s.body.Close()
	<-s.done
	return err
}
