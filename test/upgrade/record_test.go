package upgrade

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// event is one status an agent's watch stream delivered, with the step of
// the test it came in and which binary the agent ran.
type event struct {
	st   api.Status
	step string
	bin  string
}

func (e event) String() string {
	return fmt.Sprintf("role=%s leader=%q epoch=%d on %s during %q", e.st.Role, e.st.Leader, e.st.Epoch, e.bin, e.step)
}

// recorder keeps every status the agents' watch streams deliver, in order,
// across restarts: a stream that ends (its agent was killed, or is not up
// yet) is opened again, and its first status is the agent's current one.
// A new stream opens only after the old one ended, so an agent's statuses
// are in the order it published them, across restarts and binaries.
type recorder struct {
	mu     sync.Mutex
	ev     map[string][]event
	step   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// record starts a recorder of c's agents; it stops at the end of the test
// or at stop.
func (c *cluster) record() *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{ev: map[string][]event{}, cancel: cancel, step: "start"}
	for _, nd := range c.nodes {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for ctx.Err() == nil {
				if s, err := nd.c.Watch(ctx); err == nil {
					for {
						st, err := s.Next()
						if err != nil {
							break
						}
						r.mu.Lock()
						r.ev[nd.name] = append(r.ev[nd.name], event{st: st, step: r.step, bin: c.binName(nd)})
						r.mu.Unlock()
					}
					s.Close()
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

// setStep labels the events that come from now on.
func (r *recorder) setStep(step string) {
	r.mu.Lock()
	r.step = step
	r.mu.Unlock()
}

// count returns how many statuses were recorded in all.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, evs := range r.ev {
		n += len(evs)
	}
	return n
}

// violations checks everything recorded so far against the invariants
// that hold in every protocol and across versions:
//   - at most one agent says role=leader in any one epoch;
//   - no two agents name different leaders for one epoch (bully's and
//     ring's epochs carry the leader's id; majority's are terms, one
//     leader each);
//   - epochs never go back at any agent, across its restarts and
//     binaries (README: every mode).
func (r *recorder) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	type claim struct {
		node string
		e    event
	}
	leaderOf := map[uint64]claim{}
	namedIn := map[uint64]claim{}
	for name, evs := range r.ev {
		var top event
		for i, e := range evs {
			if i > 0 && e.st.Epoch < top.st.Epoch {
				out = append(out, fmt.Sprintf("%s's epoch went back: %v after %v", name, e, top))
			}
			if e.st.Epoch >= top.st.Epoch {
				top = e
			}
			if e.st.Role == api.RoleLeader {
				if p, ok := leaderOf[e.st.Epoch]; ok && p.node != name {
					out = append(out, fmt.Sprintf("two leaders in epoch %d: %s (%v) and %s (%v)", e.st.Epoch, p.node, p.e, name, e))
				} else if !ok {
					leaderOf[e.st.Epoch] = claim{name, e}
				}
			}
			if e.st.Leader != "" {
				if p, ok := namedIn[e.st.Epoch]; ok && p.e.st.Leader != e.st.Leader {
					out = append(out, fmt.Sprintf("two leaders named for epoch %d: by %s (%v) and by %s (%v)", e.st.Epoch, p.node, p.e, name, e))
				} else if !ok {
					namedIn[e.st.Epoch] = claim{name, e}
				}
			}
		}
	}
	return out
}
