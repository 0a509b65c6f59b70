package membership

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/internal/ratelog"
)

// Querier is implemented by clusters that can put a request to named
// members and collect their answers: a cluster-wide operation (a key
// rotation step) run from any one member. *Membership implements it over
// memberlist's reliable user messages — one TCP stream per request or
// answer, encrypted with the keyring like all gossip — so a member costs
// nothing between queries: no connection, no goroutine per member.
type Querier interface {
	// Query sends body to each named member and returns one Answer per
	// name, in the order given, once every member has answered or ctx is
	// done (a member that did not answer by then has an error saying so).
	Query(ctx context.Context, names []string, body []byte) []Answer
	// ServeQueries makes h answer the queries this member receives. h
	// runs on one goroutine, one query at a time, and may block briefly
	// (it saves files); its answer is sent back to the asking member.
	// Before ServeQueries a query is dropped unanswered.
	ServeQueries(h QueryHandler)
}

var _ Querier = (*Membership)(nil)

// QueryHandler answers a query from the member named from. id is the
// query's random identifier, the same for every member asked at once.
type QueryHandler func(from string, id [QueryIDLen]byte, body []byte) []byte

// Answer is one member's answer to a Query: Body, or Err when it was not
// asked (unknown, down) or did not answer in time.
type Answer struct {
	Member string
	Body   []byte
	Err    error
}

// The query frame. memberlist hands every user message to NotifyMsg, so a
// query frame starts with its own magic byte, which no gossip announcement
// starts with (protocols/observe uses 0xA7), then a version, so that a
// later layout is refused by this one instead of misread.
const (
	queryMagic   byte = 0xC5
	queryVersion byte = 1

	kindRequest byte = 1
	kindAnswer  byte = 2
)

// Limits of a query frame, checked before anything is allocated.
const (
	// QueryIDLen is the size of a query's random identifier.
	QueryIDLen = 16
	// MaxQueryBody bounds a query's or an answer's body.
	MaxQueryBody = 2048
	// maxQueryName bounds the sender's name in a frame.
	maxQueryName = 255
	// maxQueryFrame bounds a whole frame: header, name, body length, body.
	maxQueryFrame = 3 + QueryIDLen + 1 + maxQueryName + binary.MaxVarintLen16 + MaxQueryBody
)

// queryBacklog is how many received queries wait for the handler; more
// are dropped (their senders report no answer). Queries are operator
// actions, a few a minute.
const queryBacklog = 16

// queryDropLogEvery is how often a dropped query frame is logged at most.
const queryDropLogEvery = 10 * time.Second

// querySendParallel bounds the streams one Query opens at once.
const querySendParallel = 8

// queryFrame is a decoded frame.
type queryFrame struct {
	kind byte
	id   [QueryIDLen]byte
	from string
	body []byte
}

// Errors of decodeQueryFrame.
var (
	errNotQuery       = errors.New("membership: not a query frame")
	errQueryMalformed = errors.New("membership: malformed query frame")
)

// appendQueryFrame encodes f: magic, version, kind, id, the sender's name
// (one length byte), the body (uvarint length).
func appendQueryFrame(b []byte, f queryFrame) ([]byte, error) {
	if len(f.from) == 0 || len(f.from) > maxQueryName {
		return nil, fmt.Errorf("membership: query from a name of %d bytes, want 1 … %d", len(f.from), maxQueryName)
	}
	if len(f.body) > MaxQueryBody {
		return nil, fmt.Errorf("membership: query body of %d bytes, at most %d", len(f.body), MaxQueryBody)
	}
	b = append(b, queryMagic, queryVersion, f.kind)
	b = append(b, f.id[:]...)
	b = append(b, byte(len(f.from)))
	b = append(b, f.from...)
	b = binary.AppendUvarint(b, uint64(len(f.body)))
	return append(b, f.body...), nil
}

// decodeQueryFrame parses a frame made by appendQueryFrame. Any other
// input — another version, an unknown kind, truncation, trailing bytes,
// sizes beyond the limits — is an error; nothing is allocated before the
// sizes are checked. The body is copied out of b.
func decodeQueryFrame(b []byte) (queryFrame, error) {
	var f queryFrame
	if len(b) == 0 || b[0] != queryMagic {
		return f, errNotQuery
	}
	if len(b) > maxQueryFrame {
		return f, fmt.Errorf("%w: %d bytes, at most %d", errQueryMalformed, len(b), maxQueryFrame)
	}
	if len(b) < 3+QueryIDLen+1 {
		return f, fmt.Errorf("%w: %d bytes, too short", errQueryMalformed, len(b))
	}
	if b[1] != queryVersion {
		return f, fmt.Errorf("%w: version %d, this agent reads version %d: run the same conclave release on every member", errQueryMalformed, b[1], queryVersion)
	}
	f.kind = b[2]
	if f.kind != kindRequest && f.kind != kindAnswer {
		return f, fmt.Errorf("%w: kind %d", errQueryMalformed, f.kind)
	}
	copy(f.id[:], b[3:3+QueryIDLen])
	rest := b[3+QueryIDLen:]
	n := int(rest[0])
	rest = rest[1:]
	if n == 0 || n > len(rest) {
		return f, fmt.Errorf("%w: sender name of %d bytes in %d", errQueryMalformed, n, len(rest))
	}
	f.from = string(rest[:n])
	rest = rest[n:]
	size, k := binary.Uvarint(rest)
	// Only the shortest encoding: one frame, one spelling.
	if k <= 0 || size > MaxQueryBody || k != len(binary.AppendUvarint(nil, size)) {
		return f, fmt.Errorf("%w: bad body length", errQueryMalformed)
	}
	rest = rest[k:]
	if uint64(len(rest)) != size {
		return f, fmt.Errorf("%w: body of %d bytes where %d are announced", errQueryMalformed, len(rest), size)
	}
	f.body = append([]byte(nil), rest...)
	return f, nil
}

// queries is a Membership's query state.
type queries struct {
	// dropLog limits the lines for frames dropped: whoever can reach the
	// gossip port of a cluster without a key can send them.
	dropLog *ratelog.Limiter

	handler sync.Mutex // guards h
	h       QueryHandler
	in      chan queryFrame

	mu      sync.Mutex
	pending map[[QueryIDLen]byte]chan queryFrame
	// sends counts the streams in flight, which Shutdown waits for: a
	// stream to an unreachable member outlives its Query by up to
	// memberlist's TCP timeout.
	sends sync.WaitGroup
}

func newQueries() *queries {
	return &queries{dropLog: ratelog.New(queryDropLogEvery), in: make(chan queryFrame, queryBacklog), pending: make(map[[QueryIDLen]byte]chan queryFrame)}
}

// ServeQueries implements Querier.
func (m *Membership) ServeQueries(h QueryHandler) {
	m.q.handler.Lock()
	m.q.h = h
	m.q.handler.Unlock()
}

// Query implements Querier. This member is never asked through the
// network: a name equal to its own gets an error, so callers handle it.
func (m *Membership) Query(ctx context.Context, names []string, body []byte) []Answer {
	out := make([]Answer, len(names))
	var id [QueryIDLen]byte
	if _, err := rand.Read(id[:]); err != nil {
		for i, n := range names {
			out[i] = Answer{Member: n, Err: fmt.Errorf("membership: query id: %w", err)}
		}
		return out
	}
	frame, err := appendQueryFrame(nil, queryFrame{kind: kindRequest, id: id, from: m.name, body: body})
	if err != nil {
		for i, n := range names {
			out[i] = Answer{Member: n, Err: err}
		}
		return out
	}
	answers := make(chan queryFrame, len(names))
	m.q.mu.Lock()
	m.q.pending[id] = answers
	m.q.mu.Unlock()
	defer func() {
		m.q.mu.Lock()
		delete(m.q.pending, id)
		m.q.mu.Unlock()
	}()

	nodes := make(map[string]*memberlist.Node)
	for _, mb := range m.Members() {
		if n := sendNode(mb); n != nil {
			nodes[mb.Name] = n
		}
	}
	waiting := make(map[string]int, len(names))
	sendErrs := make(chan Answer, len(names))
	sem := make(chan struct{}, querySendParallel)
	for i, name := range names {
		out[i] = Answer{Member: name}
		node, ok := nodes[name]
		switch {
		case name == m.name:
			out[i].Err = errors.New("membership: a query is not sent to this member itself")
			continue
		case !ok:
			out[i].Err = errors.New("not alive in gossip: not asked")
			continue
		}
		if _, dup := waiting[name]; dup {
			out[i].Err = errors.New("named twice: asked once")
			continue
		}
		waiting[name] = i
		m.lifeMu.Lock()
		if m.shutdown {
			m.lifeMu.Unlock()
			sendErrs <- Answer{Member: name, Err: ErrShutdown}
			continue
		}
		m.q.sends.Add(1)
		m.lifeMu.Unlock()
		go func() {
			defer m.q.sends.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := m.ml.SendReliable(node, frame); err != nil {
				sendErrs <- Answer{Member: name, Err: fmt.Errorf("could not send the request: %w", err)}
			}
		}()
	}
	for len(waiting) > 0 {
		select {
		case a := <-sendErrs:
			if i, ok := waiting[a.Member]; ok {
				out[i].Err = a.Err
				delete(waiting, a.Member)
			}
		case f := <-answers:
			if i, ok := waiting[f.from]; ok {
				out[i].Body = f.body
				delete(waiting, f.from)
			}
		case <-ctx.Done():
			for _, i := range waiting {
				out[i].Err = fmt.Errorf("no answer in time: %w", ctx.Err())
			}
			return out
		}
	}
	return out
}

// queryMsg takes a received query frame, on a memberlist goroutine: it
// must not block. A request waits for the handler goroutine; an answer
// goes to the Query waiting for it, if any.
func (m *Membership) queryMsg(b []byte) {
	f, err := decodeQueryFrame(b)
	if err != nil {
		m.dropped("dropping a query frame", zap.Error(err))
		return
	}
	switch f.kind {
	case kindRequest:
		select {
		case m.q.in <- f:
		default:
			m.dropped("dropping a query: too many wait for an answer", zap.String("from", f.from))
		}
	case kindAnswer:
		m.q.mu.Lock()
		ch := m.q.pending[f.id]
		m.q.mu.Unlock()
		if ch == nil {
			return // a Query that gave up, or a stray
		}
		select {
		case ch <- f:
		default: // more answers than members asked: a duplicate
		}
	}
}

// dropped logs a dropped query frame, at most once per queryDropLogEvery.
func (m *Membership) dropped(msg string, fields ...zap.Field) {
	if ok, n := m.q.dropLog.Allow(time.Now()); ok {
		m.log.Warn(msg, append(fields, zap.Uint64("suppressed_since_last", n))...)
	}
}

// serveQueries answers received queries one at a time until Shutdown.
func (m *Membership) serveQueries() {
	defer m.joinDone.Done()
	for {
		select {
		case <-m.stopJoin:
			return
		case f := <-m.q.in:
			m.answer(f)
		}
	}
}

// answerSenderWait bounds how long an answer waits for its asker to be
// alive in this member's gossip view: a member that just joined may hear
// a query before gossip told it of the asker (a race seen at start).
const answerSenderWait = 2 * time.Second

// sendNode returns what memberlist's SendReliable needs to reach mb —
// its name and gossip address — or nil unless mb is alive (or suspect)
// with a valid address. It is built from this node's own member table,
// never taken from memberlist's Members: those are pointers into
// memberlist's state, which its gossip rewrites (a member's address on a
// re-alive) while a send reads them (the race detector caught it).
func sendNode(mb Member) *memberlist.Node {
	if mb.State != StateAlive && mb.State != StateSuspect {
		return nil
	}
	host, port, err := net.SplitHostPort(mb.Addr)
	if err != nil {
		return nil
	}
	p, err := strconv.ParseUint(port, 10, 16)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return nil
	}
	return &memberlist.Node{Name: mb.Name, Addr: ip, Port: uint16(p)}
}

// awaitMember returns the member called name from the gossip view,
// waiting up to answerSenderWait for it to appear; nil if it does not or
// this member shuts down.
func (m *Membership) awaitMember(name string) *memberlist.Node {
	deadline := time.Now().Add(answerSenderWait)
	for {
		m.mu.Lock()
		mb, ok := m.members[name]
		m.mu.Unlock()
		if n := sendNode(mb); ok && n != nil {
			return n
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-m.stopJoin:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answer runs the handler on f and sends its answer to the asking member.
func (m *Membership) answer(f queryFrame) {
	m.q.handler.Lock()
	h := m.q.h
	m.q.handler.Unlock()
	if h == nil {
		m.log.Debug("dropping a query: nothing serves queries yet", zap.String("from", f.from))
		return
	}
	body := h(f.from, f.id, f.body)
	to := m.awaitMember(f.from)
	if to == nil {
		m.log.Warn("cannot answer a query: its sender is not alive in gossip", zap.String("from", f.from))
		return
	}
	frame, err := appendQueryFrame(nil, queryFrame{kind: kindAnswer, id: f.id, from: m.name, body: body})
	if err != nil {
		m.log.Warn("cannot answer a query", zap.String("from", f.from), zap.Error(err))
		return
	}
	if err := m.ml.SendReliable(to, frame); err != nil {
		m.log.Warn("could not send a query's answer", zap.String("to", f.from), zap.Error(err))
	}
}
