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
)

// Hub fans the agent's status out to watchers and wakes blocking queries.
// The agent's event loop calls Publish; any goroutine may Subscribe. All
// methods are safe for concurrent use.
type Hub struct {
	bufSize int

	mu       sync.Mutex
	cur      api.Status
	have     bool                       // cur has been published
	changed  chan struct{}              // closed and replaced on every change
	watchers map[*Subscription]struct{} // live subscriptions
	closed   bool
}

// NewHub returns a Hub whose watchers buffer their snapshot plus bufSize
// changes (bufSize ≤ 0: DefaultWatchBuffer).
func NewHub(bufSize int) *Hub {
	if bufSize <= 0 {
		bufSize = DefaultWatchBuffer
	}
	return &Hub{
		bufSize:  bufSize,
		changed:  make(chan struct{}),
		watchers: make(map[*Subscription]struct{}),
	}
}

// Publish records s as the current status and hands it to every watcher.
// It never blocks: a watcher whose buffer is full is closed with ErrLagged.
// A status equal to the current one is not a change and is dropped, so the
// agent may publish on every tick. Publish after Close does nothing.
func (h *Hub) Publish(s api.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || (h.have && s == h.cur) {
		return
	}
	h.cur, h.have = s, true
	close(h.changed)
	h.changed = make(chan struct{})
	for w := range h.watchers {
		select {
		case w.ch <- s:
		default:
			h.dropLocked(w, ErrLagged)
		}
	}
}

// Current returns the last published status; ok is false before the first
// Publish.
func (h *Hub) Current() (s api.Status, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur, h.have
}

// wakeup returns a channel closed at the next change, and whether the hub
// is closed (then no change will come).
func (h *Hub) wakeup() (changed <-chan struct{}, closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed, h.closed
}

// Subscribe registers a watcher. Its channel first yields the current
// status (when one has been published) — taken under the same lock that
// registers the watcher, so no change can fall between the snapshot and the
// stream — and then every change. The caller must Close it.
func (h *Hub) Subscribe() *Subscription {
	w := &Subscription{hub: h, ch: make(chan api.Status, h.bufSize+1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		w.err = ErrHubClosed
		close(w.ch)
		return w
	}
	if h.have {
		w.ch <- h.cur // cannot block: the channel is new and has room
	}
	h.watchers[w] = struct{}{}
	return w
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
	close(h.changed)
	h.changed = make(chan struct{})
	for w := range h.watchers {
		h.dropLocked(w, ErrHubClosed)
	}
}

// Watchers returns the number of live subscriptions.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

func (h *Hub) dropLocked(w *Subscription, err error) {
	delete(h.watchers, w)
	w.err = err
	close(w.ch)
}

// Subscription is one watcher of a Hub.
type Subscription struct {
	hub *Hub
	ch  chan api.Status
	err error // guarded by hub.mu; set before ch is closed
}

// C yields the current status, then every change. It is closed when the
// subscription ends; Err then says why.
func (w *Subscription) C() <-chan api.Status { return w.ch }

// Err returns why C was closed by the hub (ErrLagged, ErrHubClosed), or nil
// while it is open or after the subscriber's own Close.
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
	if _, ok := h.watchers[w]; ok {
		delete(h.watchers, w)
		close(w.ch)
	}
}
