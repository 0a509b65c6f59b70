package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Record kinds in the history file.
const (
	kindStatus    = "status"    // an agent's /v1/status changed (or it became unreachable)
	kindHardState = "hardstate" // an agent's data_dir/hardstate changed
	kindSched     = "sched"     // a scheduler replica's event (write, raise, lost, …)
	kindFault     = "fault"     // the nemesis started a fault
	kindHeal      = "heal"      // the nemesis ended it
	kindWake      = "wake"      // a frozen scheduler was resumed (freeze fault)
	kindProc      = "proc"      // a process started or exited
	kindNote      = "note"      // anything else worth reading
	kindOp        = "op"        // one request a client made of an agent, and its answer
)

// Operations (Record.Op) a client makes of an agent's socket.
const (
	opStatus     = "status"     // GET /v1/status, answered from the agent's snapshot
	opConsistent = "consistent" // GET /v1/status?consistent: a leader confirms with a quorum first
	opWatch      = "watch"      // one event of GET /v1/watch (no call time: Call = Ret)
)

// Record is one line of the history file (JSONL). T is the wall-clock time
// in unix nanoseconds; scheduler events carry the scheduler's own clock
// (same host).
type Record struct {
	T    int64  `json:"t"`
	Kind string `json:"kind"`
	Node string `json:"node,omitempty"`

	// status
	Up     bool   `json:"up,omitempty"`
	Role   string `json:"role,omitempty"`
	Leader string `json:"leader,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"`

	// hardstate
	Term uint64 `json:"term,omitempty"`
	Vote uint64 `json:"vote,omitempty"`

	// sched
	Ev     string `json:"ev,omitempty"`
	Tick   int64  `json:"tick,omitempty"`
	Result string `json:"result,omitempty"`
	Err    string `json:"err,omitempty"`

	// fault, heal, proc, note
	Fault   string   `json:"fault,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Round   int      `json:"round,omitempty"`
	// LeaderHit: the fault takes the leader of the moment away (kills,
	// pauses or cuts it off from a majority).
	LeaderHit bool   `json:"leader_hit,omitempty"`
	Detail    string `json:"detail,omitempty"`

	// op: Node is the agent asked, Obs the client that asked (one
	// sequential observer: "n1/status"), Up whether it answered (Err says
	// why not), and Role, Leader, Epoch and LeaseNS its answer. Call and
	// Ret are taken in the harness just before the request and just after
	// the answer, on its monotonic clock (monoClock), in nanoseconds.
	// A scheduler's raise and write (sched) carry Call and Ret too, from
	// the scheduler's wall clock: they are compared only with each other.
	Op      string `json:"op,omitempty"`
	Obs     string `json:"obs,omitempty"`
	Call    int64  `json:"call,omitempty"`
	Ret     int64  `json:"ret,omitempty"`
	LeaseNS int64  `json:"lease_ns,omitempty"`
}

// monoClock reads the harness's monotonic clock as nanoseconds on the
// unix scale: base's wall time plus the monotonic time elapsed since base.
// Every agent runs on the same kernel (network namespaces share it), so
// durations it measures (lease_ns) are on the same clock; wall-clock steps
// during a run cannot reorder operations.
type monoClock struct{ base time.Time }

func (c monoClock) now() int64 { return c.base.UnixNano() + int64(time.Since(c.base)) }

// History appends records to a JSONL file. Safe for concurrent use.
type History struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

// CreateHistory creates (truncates) the history file at path.
func CreateHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &History{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Add appends r, stamping it with the current time if T is zero.
func (h *History) Add(r Record) {
	if r.T == 0 {
		r.T = time.Now().UnixNano()
	}
	b, err := json.Marshal(r)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	if err != nil {
		h.err = err
		return
	}
	b = append(b, '\n')
	if _, err := h.w.Write(b); err != nil {
		h.err = err
	}
}

// Close flushes and closes the file, returning the first error seen.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.w.Flush(); err != nil && h.err == nil {
		h.err = err
	}
	if err := h.f.Close(); err != nil && h.err == nil {
		h.err = err
	}
	if h.err != nil {
		return fmt.Errorf("history: %w", h.err)
	}
	return nil
}

// ReadHistory reads a JSONL history, sorted by time (stable: records of one
// writer keep their order).
func ReadHistory(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out, nil
}
