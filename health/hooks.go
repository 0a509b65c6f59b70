package health

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Transition names, as in [[hook]] on = ….
const (
	OnLeader   = "leader"
	OnFollower = "follower"
	OnNoLeader = "no_leader"
)

// HookSpec is one [[hook]].
type HookSpec struct {
	On      string
	Command []string
	Timeout time.Duration
}

// Transition is a change of this agent's view of leadership.
type Transition struct {
	// On is OnLeader (this node leads), OnFollower (another node leads)
	// or OnNoLeader.
	On string
	// Epoch and Leader name the leadership ("" when none); Role is this
	// node's role as the API names it.
	Epoch  uint64
	Leader string
	Role   string
}

// hookQueue bounds the transitions waiting for the hook goroutine. A
// flapping cluster must not queue without end; the oldest waiting
// transition is dropped (and counted) instead, since only the newest
// state matters to a hook that moves a virtual IP.
const hookQueue = 16

// HookStats counts hook runs.
type HookStats struct {
	Runs, Failures, Dropped uint64
}

// Hooks runs the configured hooks on transitions, one at a time in the
// order of the transitions, in a goroutine of its own.
type Hooks struct {
	specs []HookSpec
	log   *zap.Logger
	// election names the election whose transitions these hooks run
	// for, exported to them as CONCLAVE_ELECTION.
	election string

	mu     sync.Mutex
	queue  []Transition
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	runs, failures, dropped atomic.Uint64
}

// NewHooks starts the hook goroutine for the transitions of election;
// Close stops it. A nil logger discards.
func NewHooks(election string, specs []HookSpec, log *zap.Logger) *Hooks {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hooks{election: election, specs: specs, log: log, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go h.loop(ctx)
	return h
}

// Fire queues t for the hooks registered on t.On. It never blocks.
func (h *Hooks) Fire(t Transition) {
	wanted := false
	for _, s := range h.specs {
		wanted = wanted || s.On == t.On
	}
	if !wanted {
		return
	}
	h.mu.Lock()
	if len(h.queue) == hookQueue {
		h.queue = h.queue[1:]
		h.dropped.Add(1)
	}
	h.queue = append(h.queue, t)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Stats returns the hook counters.
func (h *Hooks) Stats() HookStats {
	return HookStats{Runs: h.runs.Load(), Failures: h.failures.Load(), Dropped: h.dropped.Load()}
}

// Close kills a hook in progress, drops the queue and waits.
func (h *Hooks) Close() {
	h.cancel()
	<-h.done
}

func (h *Hooks) loop(ctx context.Context) {
	defer close(h.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		for {
			h.mu.Lock()
			if len(h.queue) == 0 {
				h.mu.Unlock()
				break
			}
			t := h.queue[0]
			h.queue = h.queue[1:]
			h.mu.Unlock()
			for _, s := range h.specs {
				if s.On == t.On && ctx.Err() == nil {
					h.run(ctx, s, t)
				}
			}
		}
	}
}

func (h *Hooks) run(ctx context.Context, s HookSpec, t Transition) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	env := append(os.Environ(),
		"CONCLAVE_EPOCH="+strconv.FormatUint(t.Epoch, 10),
		"CONCLAVE_LEADER="+t.Leader,
		"CONCLAVE_ROLE="+t.Role,
		"CONCLAVE_ELECTION="+h.election,
	)
	start := time.Now()
	ok, out := runCommandEnv(ctx, s.Command, env)
	h.runs.Add(1)
	fields := []zap.Field{zap.String("on", t.On), zap.Strings("command", s.Command), zap.Uint64("epoch", t.Epoch),
		zap.String("leader", t.Leader), zap.Duration("took", time.Since(start))}
	if !ok {
		h.failures.Add(1)
		h.log.Warn("hook failed", append(fields, zap.String("output", out))...)
		return
	}
	h.log.Info("hook ran", fields...)
}

// String renders the stats for logs.
func (s HookStats) String() string {
	return fmt.Sprintf("%d runs, %d failed, %d dropped", s.Runs, s.Failures, s.Dropped)
}
