// Package ratelog limits log lines that other machines can trigger. A
// sender that floods the agent with bad packets, handshakes or absurd
// messages must not flood the log (or the disk under it): each kind of
// event is logged at most once per interval, the line says how many were
// left out, and every event is counted so /metrics shows the true rate.
package ratelog

import (
	"sync"
	"time"
)

// Limiter decides which events of one kind are logged. It is safe for
// concurrent use. The zero value is not usable; call New.
type Limiter struct {
	every time.Duration

	mu         sync.Mutex
	next       time.Time
	suppressed uint64
	total      uint64
}

// New returns a limiter that lets one event through per interval every.
func New(every time.Duration) *Limiter { return &Limiter{every: every} }

// Allow records one event at now. It reports whether the event should be
// logged and, if so, how many events were left out since the last one
// logged.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	l.next = now.Add(l.every)
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// Total returns how many events Allow has recorded, logged or not.
func (l *Limiter) Total() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// maxKeys bounds a Set: keys come from log messages, a small fixed set,
// but a message that embeds a remote's input must not grow it for ever.
const maxKeys = 256

// Set is a Limiter per key (a log message), created on first use. It is
// safe for concurrent use.
type Set struct {
	every time.Duration

	mu sync.Mutex
	m  map[string]*Limiter
}

// NewSet returns a set whose limiters let one event per key through per
// interval every.
func NewSet(every time.Duration) *Set { return &Set{every: every, m: map[string]*Limiter{}} }

// Allow is Limiter.Allow for key's limiter. Beyond maxKeys distinct keys,
// new keys share one limiter.
func (s *Set) Allow(key string, now time.Time) (ok bool, suppressed uint64) {
	s.mu.Lock()
	l, found := s.m[key]
	if !found {
		if len(s.m) >= maxKeys {
			key = "\x00other"
			l = s.m[key]
		}
		if l == nil {
			l = New(s.every)
			s.m[key] = l
		}
	}
	s.mu.Unlock()
	return l.Allow(now)
}
