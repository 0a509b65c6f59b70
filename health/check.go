package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// MaxOutput is how many trailing bytes of a check's output (stdout and
// stderr together, or the HTTP status and body) are kept.
const MaxOutput = 1024

// CheckSpec is one check, as configured ([[check]]).
type CheckSpec struct {
	Name string
	// Command is run without a shell; exit status 0 passes. Exactly one of
	// Command and HTTP is set.
	Command []string
	// HTTP is fetched with GET; a 2xx answer passes.
	HTTP string
	// Interval is the time between the starts of two runs; Timeout bounds
	// one run (a run never overlaps the next).
	Interval, Timeout time.Duration
	// Fall consecutive failures fail a passing check; Rise consecutive
	// passes pass a failing one.
	Fall, Rise int
}

// Status values of a check.
const (
	// StatusPending: not run yet. A pending check counts as failing: a
	// starting agent must not lead before its service is known healthy.
	StatusPending = "pending"
	StatusPassing = "passing"
	StatusFailing = "failing"
)

// CheckState is what a check last found.
type CheckState struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Output is the tail of the last run's output (at most MaxOutput
	// bytes), or why it failed to run.
	Output string `json:"output"`
	// LastRun is when the last run ended; zero before the first.
	LastRun time.Time `json:"last_run,omitzero"`
	// Passes and Failures count runs by result since start.
	Passes   uint64 `json:"passes"`
	Failures uint64 `json:"failures"`
	// streak is the consecutive results that disagree with Status.
	streak int
}

// Runner runs checks, each in its own goroutine.
type Runner struct {
	specs   []CheckSpec
	client  *http.Client
	changed chan struct{}

	mu     sync.Mutex
	states []CheckState

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewRunner returns a runner for specs; Start starts it. The specs must be
// valid (config.Validate checks them).
func NewRunner(specs []CheckSpec) (*Runner, error) {
	r := &Runner{
		specs:   specs,
		changed: make(chan struct{}, 1),
		// No keep-alive: a check every second must not hold a connection
		// to the service open between runs; no redirects beyond the
		// client's default ten.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}},
	}
	for _, s := range specs {
		switch {
		case s.Name == "":
			return nil, errors.New("health: a check needs a name")
		case (len(s.Command) == 0) == (s.HTTP == ""):
			return nil, fmt.Errorf("health: check %q: set command or http", s.Name)
		case s.Interval <= 0 || s.Timeout <= 0 || s.Fall < 1 || s.Rise < 1:
			return nil, fmt.Errorf("health: check %q: interval, timeout, fall and rise must be positive", s.Name)
		}
		r.states = append(r.states, CheckState{Name: s.Name, Status: StatusPending})
	}
	return r, nil
}

// Start runs every check now and then at its interval, until Close.
func (r *Runner) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for i := range r.specs {
		r.wg.Add(1)
		go r.loop(ctx, i)
	}
}

// Close stops the checks, killing runs in progress, and waits for them.
func (r *Runner) Close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	r.client.CloseIdleConnections()
}

// Changed receives a value after one or more checks changed status (it
// coalesces: one value may stand for several changes). Read Snapshot then.
func (r *Runner) Changed() <-chan struct{} { return r.changed }

// Snapshot returns every check's state, in configuration order.
func (r *Runner) Snapshot() []CheckState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]CheckState(nil), r.states...)
}

// Passing reports whether every check passes (true without checks).
func (r *Runner) Passing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.states {
		if s.Status != StatusPassing {
			return false
		}
	}
	return true
}

func (r *Runner) loop(ctx context.Context, i int) {
	defer r.wg.Done()
	spec := r.specs[i]
	t := time.NewTicker(spec.Interval)
	defer t.Stop()
	for {
		ok, out := r.runOnce(ctx, spec)
		if ctx.Err() != nil {
			return
		}
		r.record(i, ok, out)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record applies one result with fall and rise, and notifies on a change.
func (r *Runner) record(i int, ok bool, out string) {
	spec := r.specs[i]
	r.mu.Lock()
	s := &r.states[i]
	s.Output, s.LastRun = out, time.Now()
	before := s.Status
	if ok {
		s.Passes++
	} else {
		s.Failures++
	}
	switch {
	case s.Status == StatusPending:
		// The first result decides: waiting for rise passes would only
		// delay a healthy start.
		s.Status, s.streak = statusOf(ok), 0
	case (s.Status == StatusPassing) == ok:
		s.streak = 0
	default:
		s.streak++
		if need := map[bool]int{true: spec.Rise, false: spec.Fall}[ok]; s.streak >= need {
			s.Status, s.streak = statusOf(ok), 0
		}
	}
	changed := s.Status != before
	r.mu.Unlock()
	if changed {
		select {
		case r.changed <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

func statusOf(ok bool) string {
	if ok {
		return StatusPassing
	}
	return StatusFailing
}

func (r *Runner) runOnce(ctx context.Context, spec CheckSpec) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	if spec.HTTP != "" {
		return r.runHTTP(ctx, spec)
	}
	return runCommandEnv(ctx, spec.Command, nil)
}

// runCommand runs argv in a process group of its own, so a timeout kills
// whatever it started too, and keeps the tail of its output.
// env nil means the agent's environment.
func runCommandEnv(ctx context.Context, argv []string, env []string) (bool, string) {
	var out tailBuffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the output pipe must not hold the check.
	cmd.WaitDelay = 100 * time.Millisecond
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return false, out.String() + "(timed out)"
	case err != nil:
		return false, out.String() + "(" + err.Error() + ")"
	}
	return true, out.String()
}

func (r *Runner) runHTTP(ctx context.Context, spec CheckSpec) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.HTTP, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "conclave-health-check")
	resp, err := r.client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var out tailBuffer
	fmt.Fprintf(&out, "HTTP %s\n", resp.Status)
	// Read at most a bounded amount: a check must not stream forever.
	_, _ = io.Copy(&out, io.LimitReader(resp.Body, 64*MaxOutput))
	return resp.StatusCode >= 200 && resp.StatusCode < 300, out.String()
}

// tailBuffer keeps the last MaxOutput bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > MaxOutput {
		p = p[len(p)-MaxOutput:]
	}
	if over := t.buf.Len() + len(p) - MaxOutput; over > 0 {
		t.buf.Next(over)
	}
	t.buf.Write(p)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
