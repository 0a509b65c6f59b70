package multihost

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// event is one status a host's watch stream delivered, with when the test
// read it (after the agent published it) and which of the test's streams
// to that host it came on (a new one after each restart).
type event struct {
	at     time.Time
	st     api.Status
	stream int
}

func (e event) String() string {
	return fmt.Sprintf("role=%s leader=%q epoch=%d", e.st.Role, e.st.Leader, e.st.Epoch)
}

// recorder keeps every status the given hosts' watch streams deliver, in
// order, across restarts: a stream that ends (its agent was killed, or is
// not up yet) is opened again, and its first status is the agent's current
// one. Within one stream statuses come in the order the agent published
// them; a new stream opens only after the old one ended, so a host's
// statuses are in order across restarts too.
type recorder struct {
	mu     sync.Mutex
	ev     map[string][]event
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// record starts a recorder of hs; it stops at the end of the test, or at
// stop.
func (c *cluster) record(hs ...*host) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{ev: map[string][]event{}, cancel: cancel}
	for _, h := range hs {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for stream := 1; ctx.Err() == nil; {
				if s, err := h.c.Watch(ctx); err == nil {
					for {
						st, err := s.Next()
						if err != nil {
							break
						}
						r.mu.Lock()
						r.ev[h.name] = append(r.ev[h.name], event{at: time.Now(), st: st, stream: stream})
						r.mu.Unlock()
					}
					s.Close()
					stream++
				}
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	c.t.Cleanup(r.stop)
	return r
}

func (r *recorder) stop() {
	r.cancel()
	r.wg.Wait()
}

// events returns a copy of what name's streams delivered so far.
func (r *recorder) events(name string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.ev[name]...)
}

// since returns name's statuses read at or after t.
func (r *recorder) since(name string, t time.Time) []event {
	var out []event
	for _, e := range r.events(name) {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits until one of name's statuses read at or after t
// satisfies cond, and returns the first that does.
func (r *recorder) waitEvent(t testing.TB, name, what string, from time.Time, cond func(api.Status) bool) event {
	t.Helper()
	var found event
	waitFor(t, name+" to publish "+what, func() (bool, string) {
		evs := r.since(name, from)
		for _, e := range evs {
			if cond(e.st) {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d statuses since, the last %v", len(evs), lastEvents(evs, 3))
	})
	return found
}

func lastEvents(evs []event, n int) []event {
	if len(evs) > n {
		return evs[len(evs)-n:]
	}
	return evs
}

// epochsNeverFall fails the test if a host published an epoch below one it
// had published before, across its restarts (README: epochs strictly
// increase at every agent, across restarts).
func (r *recorder) epochsNeverFall(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, evs := range r.ev {
		var top event
		for i, e := range evs {
			if i > 0 && e.st.Epoch < top.st.Epoch {
				t.Errorf("%s published epoch %d (stream %d: %v) after epoch %d (stream %d: %v)", name, e.st.Epoch, e.stream, e, top.st.Epoch, top.stream, top)
				break
			}
			if e.st.Epoch >= top.st.Epoch {
				top = e
			}
		}
	}
}
