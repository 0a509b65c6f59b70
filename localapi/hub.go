package localapi

import (
	"errors"
	"sync"

	"github.com/conclave-agent/conclave/api"
)

// DefaultWatchBuffer is the number of changes a watcher may fall behind
// before it is closed. Leadership changes are rare (a few per election), so
// a watcher 64 changes behind is stuck, not busy.
const DefaultWatchBuffer = 64

// Reasons a Subscription ends, reported by Subscription.Err.
var (
	// ErrLagged: the watcher fell more than its buffer behind and was
	// closed so the publisher never waits for it.
	ErrLagged = errors.New("watcher fell behind and was closed; watch again")
	// ErrHubClosed: the agent is shutting down.
	ErrHubClosed = errors.New("agent is shutting down")
	// ErrElectionDropped: the agent stopped running the watched election
	// (Hub.Drop).
	ErrElectionDropped = errors.New("the agent no longer runs this election; agent elections lists those it runs")
)

// Hub fans the agent's status out to watchers and wakes blocking queries,
// one stream per election: the agent's event loop calls PublishTo for each
// election it runs (Publish for api.DefaultElection); any goroutine may
// SubscribeTo one election. A change of one election reaches only that
// election's watchers and blocking queries. All methods are safe for
// concurrent use.
type Hub struct {
	bufSize int

	mu     sync.Mutex
	topics map[string]*topic // by election name
	// unborn is closed and replaced whenever a topic is made: a blocking
	// query of an election without a topic yet waits on it, so asking
	// about a name never makes a topic (a caller trying names could
	// otherwise grow the map without bound).
	unborn chan struct{}
	closed bool
}

// topic is one election's stream. Its fields are guarded by Hub.mu.
type topic struct {
	cur      api.Status
	have     bool                       // cur has been published
	changed  chan struct{}              // closed and replaced on every change
	watchers map[*Subscription]struct{} // live subscriptions
}

// NewHub returns a Hub whose watchers buffer their snapshot plus bufSize
// changes (bufSize ≤ 0: DefaultWatchBuffer).
func NewHub(bufSize int) *Hub {
	if bufSize <= 0 {
		bufSize = DefaultWatchBuffer
	}
	return &Hub{bufSize: bufSize, topics: make(map[string]*topic), unborn: make(chan struct{})}
}

// topicLocked returns election's topic, made on first use. h.mu is held.
// Topics live while their election has a published status or a watcher.
func (h *Hub) topicLocked(election string) *topic {
	election = orDefault(election)
	t, ok := h.topics[election]
	if !ok {
		t = &topic{changed: make(chan struct{}), watchers: make(map[*Subscription]struct{})}
		h.topics[election] = t
		close(h.unborn)
		h.unborn = make(chan struct{})
	}
	return t
}

// forgetLocked removes t, election's topic, when it holds nothing: no
// status and no watcher. Its blocking queries wake and find the next.
func (h *Hub) forgetLocked(election string, t *topic) {
	if t.have || len(t.watchers) > 0 || h.topics[election] != t {
		return
	}
	delete(h.topics, election)
	close(t.changed)
	t.changed = make(chan struct{})
}

// Publish is PublishTo(api.DefaultElection, s).
func (h *Hub) Publish(s api.Status) { h.PublishTo(api.DefaultElection, s) }

// PublishTo records s as the current status of election and hands it to
// every watcher of that election. It never blocks: a watcher whose buffer
// is full is closed with ErrLagged. A status equal to the election's
// current one is not a change and is dropped, so the agent may publish on
// every tick. PublishTo after Close does nothing.
func (h *Hub) PublishTo(election string, s api.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	t := h.topicLocked(election)
	if t.have && s == t.cur {
		return
	}
	t.cur, t.have = s, true
	close(t.changed)
	t.changed = make(chan struct{})
	for w := range t.watchers {
		select {
		case w.ch <- s:
		default:
			h.dropLocked(t, w, ErrLagged)
		}
	}
}

// Current is CurrentOf(api.DefaultElection).
func (h *Hub) Current() (s api.Status, ok bool) { return h.CurrentOf(api.DefaultElection) }

// CurrentOf returns the last status published for election; ok is false
// before the first.
func (h *Hub) CurrentOf(election string) (s api.Status, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, found := h.topics[orDefault(election)]; found {
		return t.cur, t.have
	}
	return api.Status{}, false
}

// wakeup returns a channel closed at the next change of election, and
// whether the hub is closed (then no change will come).
func (h *Hub) wakeup(election string) (changed <-chan struct{}, closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		c := make(chan struct{})
		close(c)
		return c, true
	}
	if t, ok := h.topics[orDefault(election)]; ok {
		return t.changed, false
	}
	return h.unborn, false
}

// Subscribe is SubscribeTo(api.DefaultElection).
func (h *Hub) Subscribe() *Subscription { return h.SubscribeTo(api.DefaultElection) }

// SubscribeTo registers a watcher of election. Its channel first yields
// the election's current status (when one has been published) — taken
// under the same lock that registers the watcher, so no change can fall
// between the snapshot and the stream — and then every change. The caller
// must Close it. The hub does not know which elections exist: the server
// asks the Backend before it subscribes.
func (h *Hub) SubscribeTo(election string) *Subscription {
	w := &Subscription{hub: h, ch: make(chan api.Status, h.bufSize+1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		w.err = ErrHubClosed
		close(w.ch)
		return w
	}
	t := h.topicLocked(election)
	w.topic, w.election = t, orDefault(election)
	if t.have {
		w.ch <- t.cur // cannot block: the channel is new and has room
	}
	t.watchers[w] = struct{}{}
	return w
}

// Drop forgets election: its watchers end with ErrElectionDropped and its
// blocking queries wake. The agent calls it when it stops running an
// election; a later PublishTo starts the election's stream anew.
func (h *Hub) Drop(election string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := orDefault(election)
	t, ok := h.topics[name]
	if !ok {
		return
	}
	delete(h.topics, name)
	close(t.changed)
	t.changed = make(chan struct{})
	for w := range t.watchers {
		h.dropLocked(t, w, ErrElectionDropped)
	}
}

// Close ends every subscription with ErrHubClosed and wakes every blocking
// query; later subscriptions end at once. The agent calls it when stopping.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.unborn)
	h.unborn = make(chan struct{})
	for _, t := range h.topics {
		close(t.changed)
		t.changed = make(chan struct{})
		for w := range t.watchers {
			h.dropLocked(t, w, ErrHubClosed)
		}
	}
}

// Watchers returns the number of live subscriptions, of every election.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, t := range h.topics {
		n += len(t.watchers)
	}
	return n
}

func (h *Hub) dropLocked(t *topic, w *Subscription, err error) {
	delete(t.watchers, w)
	w.err = err
	close(w.ch)
}

// orDefault maps "" to api.DefaultElection.
func orDefault(election string) string {
	if election == "" {
		return api.DefaultElection
	}
	return election
}

// Subscription is one watcher of one election of a Hub.
type Subscription struct {
	hub      *Hub
	topic    *topic // nil when the hub was closed at subscription
	election string
	ch       chan api.Status
	err      error // guarded by hub.mu; set before ch is closed
}

// C yields the current status, then every change. It is closed when the
// subscription ends; Err then says why.
func (w *Subscription) C() <-chan api.Status { return w.ch }

// Err returns why C was closed by the hub (ErrLagged, ErrHubClosed,
// ErrElectionDropped), or nil while it is open or after the subscriber's
// own Close.
func (w *Subscription) Err() error {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.err
}

// Close unregisters the subscription. It is idempotent and safe to call
// after the hub closed it.
func (w *Subscription) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.topic == nil {
		return
	}
	if _, ok := w.topic.watchers[w]; ok {
		delete(w.topic.watchers, w)
		close(w.ch)
		h.forgetLocked(w.election, w.topic)
	}
}
