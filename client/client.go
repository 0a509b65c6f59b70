// Package client is the Go client of the agent's local socket API, for
// processes on the same host that need to know who leads and in which
// epoch (the fencing token).
//
// The zero Client works: it talks to api.DefaultSocketPath() ($CONCLAVE_SOCKET
// or "data/n1/agent.sock"). Methods are safe for concurrent use.
//
// A Client acts on the agent's default election; Client.Election returns
// one that acts on a named election instead, and Client.Elections lists
// the elections the agent runs.
//
// This package must import nothing but package api and the standard
// library — every local process links it — and must never cache leadership:
// each answer is the agent's at the time of asking, and a process that acts
// as leader should hold the epoch it was given and re-check (or Watch).
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// Bounds on what the client reads, so a confused peer on the socket cannot
// make it allocate without limit.
const (
	maxAnswerBytes = 4 << 20
	maxWatchLine   = 64 << 10
)

// ErrNotLeader matches (errors.Is) the *Error of a 409 answer: Resign on a
// node that does not lead.
var ErrNotLeader = errors.New("not the leader")

// ErrNoElection matches (errors.Is) the *Error of a 404 for an election
// the agent does not run; Elections lists those it does.
var ErrNoElection = errors.New("no such election")

// ErrWatchEnded is wrapped by Watcher.Next when the agent ends the stream
// (the watcher lagged, or the agent is stopping). Watch again to resume.
var ErrWatchEnded = errors.New("watch ended by the agent")

// ErrNotSocket is wrapped by a request's error when the socket path names
// something that is not a socket — a directory, a regular file — so that
// nothing could ever answer there, whether or not an agent runs.
var ErrNotSocket = errors.New("not a socket")

// notSocketError is ErrNotSocket with what the path is instead.
type notSocketError struct {
	path string
	what string // "a directory", "a regular file", …
	err  error  // the dial's own error
}

func (e *notSocketError) Error() string {
	return fmt.Sprintf("%s is %s, not a socket", e.path, e.what)
}

func (e *notSocketError) Unwrap() []error { return []error{ErrNotSocket, e.err} }

// dialError explains a failed dial of path: when path exists but is not a
// socket, the refusal is no sign of a stopped agent, and the error says
// what the path is instead.
func dialError(path string, err error) error {
	fi, serr := os.Stat(path)
	if serr != nil || fi.Mode()&os.ModeSocket != 0 {
		return err
	}
	what := "not a socket file (mode " + fi.Mode().String() + ")"
	switch {
	case fi.IsDir():
		what = "a directory"
	case fi.Mode().IsRegular():
		what = "a regular file"
	}
	return &notSocketError{path: path, what: what, err: err}
}

// Error is a non-2xx answer from the agent.
type Error struct {
	// StatusCode is the HTTP status (400, 404, 409, 503, …).
	StatusCode int
	// Message is the agent's {"error": …} text.
	Message string
	// Path is the request path.
	Path string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agent %s: %d %s: %s", e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Is makes errors.Is(err, ErrNotLeader) true for a 409,
// errors.Is(err, ErrNoElection) for the 404 of an election the agent does
// not run, and errors.Is(err, ErrSessionEnded) for a 410.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotLeader:
		return e.StatusCode == http.StatusConflict
	case ErrNoElection:
		return e.StatusCode == http.StatusNotFound && strings.HasPrefix(e.Message, "no election ")
	case ErrSessionEnded:
		return e.StatusCode == http.StatusGone
	}
	return false
}

// Client talks to one agent over its Unix socket. Do not copy a Client
// after first use.
type Client struct {
	// SocketPath is the agent's socket. Empty: api.DefaultSocketPath(),
	// read at first use.
	SocketPath string

	// election is the election the per-election methods act on; "" is
	// api.DefaultElection.
	election string

	once   sync.Once
	socket string
	hc     *http.Client
}

// Election returns a Client for the same agent whose methods act on the
// election called name: Status, ConsistentStatus, Leader, Watch, Resign,
// Maint, Voters, AddVoter, RemoveVoter and Campaign. Members, Health, Keys and
// ChangeKeys are the agent's and answer the same for every election. It
// shares c's connections, so it costs nothing to make per call. A name
// that is not valid (api.CheckElectionName) makes those methods fail
// without asking the agent; one the agent does not run fails with an
// *Error of status 404 (ErrNoElection).
func (c *Client) Election(name string) *Client {
	c.init()
	e := &Client{SocketPath: c.socket, election: name, socket: c.socket, hc: c.hc}
	e.once.Do(func() {}) // socket and hc are c's
	return e
}

// ElectionName returns the name of the election c acts on.
func (c *Client) ElectionName() string {
	if c.election == "" {
		return api.DefaultElection
	}
	return c.election
}

// path returns the path of c's election for p, one of api.ElectionPaths.
// The default election keeps the unprefixed path, which agents from
// before named elections answer too.
func (c *Client) path(p string) (string, error) {
	if c.election == "" {
		return p, nil
	}
	if err := api.CheckElectionName(c.election); err != nil {
		return "", fmt.Errorf("agent %s: %w", api.ElectionPath(c.election, p), err)
	}
	return api.ElectionPath(c.election, p), nil
}

// Elections returns the status of every election the agent runs, sorted
// by name (api.PathElections). An agent from before named elections runs
// only the default one: its status is returned as the one election.
func (c *Client) Elections(ctx context.Context) ([]api.Election, error) {
	var list []api.Election
	err := c.getJSON(ctx, api.PathElections, nil, &list)
	var ae *Error
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound && strings.Contains(ae.Message, "no such endpoint") {
		st, serr := c.Election(api.DefaultElection).Status(ctx)
		if serr != nil {
			return nil, serr
		}
		st.Election = api.DefaultElection
		return []api.Election{{Status: st}}, nil
	}
	return list, err
}

// New returns a Client for the socket at socketPath (empty: the default).
func New(socketPath string) *Client {
	return &Client{SocketPath: socketPath}
}

func (c *Client) init() {
	c.once.Do(func() {
		c.socket = c.SocketPath
		if c.socket == "" {
			c.socket = api.DefaultSocketPath()
		}
		socket := c.socket
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				conn, err := d.DialContext(ctx, "unix", socket)
				if err != nil {
					return nil, dialError(socket, err)
				}
				return conn, nil
			},
			MaxIdleConns:          4,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 0, // blocking queries hold the header; ctx bounds them
		}}
	})
}

// Socket returns the socket path the client uses.
func (c *Client) Socket() string {
	c.init()
	return c.socket
}

// Close releases idle connections. The Client remains usable.
func (c *Client) Close() {
	c.init()
	c.hc.CloseIdleConnections()
}

// Status returns the agent's status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	p, err := c.path(api.PathStatus)
	if err != nil {
		return st, err
	}
	err = c.getJSON(ctx, p, nil, &st)
	return st, err
}

// ConsistentStatus returns the agent's status after it confirmed its
// leadership with a quorum (majority only; other protocols answer 400).
func (c *Client) ConsistentStatus(ctx context.Context) (api.Status, error) {
	var st api.Status
	p, err := c.path(api.PathStatus)
	if err != nil {
		return st, err
	}
	err = c.getJSON(ctx, p, url.Values{api.ParamConsistent: {"true"}}, &st)
	return st, err
}

// Leader returns who leads. With wait > 0 it blocks until the epoch exceeds
// index or wait elapses (capped by the agent at api.MaxWait), and then
// returns the leader of that moment: compare the epoch with index to tell.
// With wait ≤ 0 it answers at once and index is ignored.
func (c *Client) Leader(ctx context.Context, index uint64, wait time.Duration) (api.Leader, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{
			api.ParamIndex: {strconv.FormatUint(index, 10)},
			api.ParamWait:  {wait.String()},
		}
	}
	var l api.Leader
	p, err := c.path(api.PathLeader)
	if err != nil {
		return l, err
	}
	err = c.getJSON(ctx, p, q, &l)
	return l, err
}

// Members returns every member the agent knows.
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	var ms []api.Member
	err := c.getJSON(ctx, api.PathMembers, nil, &ms)
	return ms, err
}

// Resign asks the agent to hand leadership over. It returns an error
// matching ErrNotLeader when the agent does not lead.
func (c *Client) Resign(ctx context.Context) error {
	var r api.Resigned
	p, err := c.path(api.PathResign)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, p, nil, &r)
}

// Health returns nil while the agent runs its event loop.
func (c *Client) Health(ctx context.Context) error {
	var h api.Health
	return c.getJSON(ctx, api.PathHealth, nil, &h)
}

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, q, out)
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	resp, err := c.send(ctx, method, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("agent %s: reading answer: %w", path, err)
	}
	if len(body) > maxAnswerBytes {
		return fmt.Errorf("agent %s: answer larger than %d bytes", path, maxAnswerBytes)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("agent %s: decoding answer: %w", path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, q url.Values) (*http.Response, error) {
	c.init()
	u := url.URL{Scheme: "http", Host: api.Host, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", path, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("agent %s: %w", path, ctx.Err())
		}
		return nil, fmt.Errorf("agent %s (is the agent running? socket %s): %w", path, c.socket, err)
	}
	return resp, nil
}

func answerError(path string, code int, body []byte) error {
	var e api.Error
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		e.Error = string(body) // not our agent's JSON; show what came
		if len(e.Error) > 200 {
			e.Error = e.Error[:200] + "…"
		}
	}
	return &Error{StatusCode: code, Message: e.Error, Path: path}
}

// Watcher is a stream of status changes from Watch.
type Watcher struct {
	path   string
	body   io.ReadCloser
	sc     *bufio.Scanner
	cancel context.CancelFunc
	ctx    context.Context
}

// Watch opens a stream of the agent's status: the current status first,
// then every change. Call Next in a loop and Close when done. Cancelling
// ctx ends the stream.
func (c *Client) Watch(ctx context.Context) (*Watcher, error) {
	p, err := c.path(api.PathWatch)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, p, nil)
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
	return &Watcher{path: p, body: resp.Body, sc: sc, cancel: cancel, ctx: ctx}, nil
}

// Next blocks until the next status. It returns an error wrapping
// ErrWatchEnded when the agent ends the stream, ctx's error when ctx ends,
// and another error when the connection breaks. After an error, the
// Watcher is done: Close it and Watch again.
func (w *Watcher) Next() (api.Status, error) {
	if !w.sc.Scan() {
		if err := w.ctx.Err(); err != nil {
			return api.Status{}, fmt.Errorf("agent %s: %w", w.path, err)
		}
		if err := w.sc.Err(); err != nil {
			return api.Status{}, fmt.Errorf("agent %s: %w", w.path, err)
		}
		return api.Status{}, fmt.Errorf("agent %s: %w: stream closed", w.path, ErrWatchEnded)
	}
	var l api.WatchLine
	if err := json.Unmarshal(w.sc.Bytes(), &l); err != nil {
		return api.Status{}, fmt.Errorf("agent %s: decoding line: %w", w.path, err)
	}
	if l.Error != "" {
		return api.Status{}, fmt.Errorf("agent %s: %w: %s", w.path, ErrWatchEnded, l.Error)
	}
	return l.Status, nil
}

// Close ends the stream. It is idempotent.
func (w *Watcher) Close() error {
	w.cancel()
	return w.body.Close()
}
