package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// exec timings. The poll keeps the lease fresh (a paused agent stops
// answering, so its lease is not renewed here and the child is stopped when
// it runs out); the watch pushes changes at once.
// How long an answer vouches for leadership, and how long before the lease
// ends the command is stopped (so SIGTERM reaches it while no other node
// can lead yet), are client.Leadership's defaults.
const (
	execPollInterval = 100 * time.Millisecond
	execPollTimeout  = 500 * time.Millisecond
	execRestartWait  = time.Second
)

func runExec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", api.DefaultSocketPath(), "agent socket (default: $"+api.EnvSocket+", then "+api.DefaultSocket+")")
	grace := fs.Duration("grace", 5*time.Second, "after SIGTERM, wait this long before SIGKILL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agent exec [-socket PATH] [-grace D] -- CMD [ARGS…]")
		fmt.Fprintln(stderr, "Runs CMD only while this node leads, with CONCLAVE_EPOCH and CONCLAVE_LEADER set;")
		fmt.Fprintln(stderr, "stops it at once (SIGTERM, then SIGKILL after -grace) on loss of leadership or of the agent.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &execRunner{
		c: client.New(*socket), argv: fs.Args(), grace: *grace,
		stdout: stdout, stderr: stderr,
	}
	defer r.c.Close()
	return r.run(ctx)
}

type statusUpdate struct {
	st  api.Status
	at  time.Time // poll: when the request was sent; watch: when the event was read
	err error
	// poll marks an answer to a poll: only those vouch for the lease,
	// because the lease counts from the time the request was sent, an
	// instant known to come before the agent computed the answer. A watch
	// event may have waited in the socket for any time.
	poll bool
}

// apply feeds u to what exec knows of the agent's leadership.
func (u statusUpdate) apply(v *client.Leadership) {
	switch {
	case u.err != nil:
		v.Lost(u.err, u.at)
	case u.poll:
		v.Polled(u.st, u.at)
	default:
		v.Watched(u.st)
	}
}

type execRunner struct {
	c      *client.Client
	argv   []string
	grace  time.Duration
	stdout io.Writer
	stderr io.Writer

	child     *exec.Cmd     // the guardian that runs the command (guardian.go)
	lifeline  *os.File      // closing it kills the command and all it started
	childDone chan error    // the child's Wait result, read only by the loop
	exited    chan struct{} // closed when the child has been waited for
	epoch     uint64
	stopping  bool
	restartAt time.Time
}

func (r *execRunner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "agent exec: "+format+"\n", args...)
}

func (r *execRunner) run(ctx context.Context) int {
	updates := make(chan statusUpdate, 16)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { r.poll(pctx, updates) })
	wg.Go(func() { r.watch(pctx, updates) })

	forward := make(chan os.Signal, 4)
	signal.Notify(forward, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(forward)

	var view client.Leadership
	// wake fires when the lease or the last poll's freshness runs out, so
	// the command is stopped then and not at some later tick.
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for {
		select {
		case <-ctx.Done():
			// SIGINT/SIGTERM to exec: pass it on, wait out the grace.
			return r.shutdown()
		case u := <-updates:
			if u.err != nil && view.Err() == nil {
				r.logf("lost contact with the agent: %v", u.err)
			}
			u.apply(&view)
		case <-wake.C:
		case sig := <-forward:
			r.signalChild(sig.(syscall.Signal))
		case err := <-r.childDone:
			r.reap(err)
		}
		r.reconcile(&view)
		// Wake at the lease's end while leading, and when a restart is
		// due; otherwise only answers (a poll every 100 ms) move anything.
		now := time.Now()
		next := now.Add(time.Hour)
		if view.Leads(now) {
			next = view.Deadline()
		}
		if r.child == nil && r.restartAt.After(now) && r.restartAt.Before(next) {
			next = r.restartAt
		}
		wake.Reset(max(next.Sub(now), time.Millisecond))
	}
}

func (r *execRunner) reconcile(v *client.Leadership) {
	now := time.Now()
	want := v.Leads(now)
	if r.child != nil {
		if !r.stopping && (!want || v.Status().Epoch != r.epoch) {
			r.logf("leadership of epoch %d lost: stopping the command", r.epoch)
			r.stopChild()
		}
		return
	}
	if want && !now.Before(r.restartAt) {
		r.startChild(v.Status())
	}
}

func (r *execRunner) startChild(st api.Status) {
	env := append(os.Environ(), "CONCLAVE_EPOCH="+strconv.FormatUint(st.Epoch, 10), "CONCLAVE_LEADER="+st.Leader)
	cmd, pid, lifeline, err := startGuarded(r.argv, env, os.Stdin, r.stdout, r.stderr)
	if err != nil {
		r.logf("cannot start %s: %v", r.argv[0], err)
		r.restartAt = time.Now().Add(execRestartWait)
		return
	}
	r.logf("leading in epoch %d: started %s (pid %d)", st.Epoch, r.argv[0], pid)
	r.child, r.lifeline, r.epoch, r.stopping = cmd, lifeline, st.Epoch, false
	done, exited := make(chan error, 1), make(chan struct{})
	r.childDone, r.exited = done, exited
	go func() {
		err := cmd.Wait()
		close(exited)
		done <- err
	}()
}

// stopChild sends SIGTERM now (the guardian relays it to the command's
// process group) and, after the grace period, cuts the lifeline: the
// guardian then SIGKILLs the command and everything it started.
func (r *execRunner) stopChild() {
	if r.child == nil || r.stopping {
		return
	}
	r.stopping = true
	_ = r.child.Process.Signal(syscall.SIGTERM)
	exited, lifeline := r.exited, r.lifeline
	grace := r.grace
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			lifeline.Close()
		case <-exited:
		}
	}()
}

func (r *execRunner) signalChild(sig syscall.Signal) {
	if r.child != nil {
		_ = r.child.Process.Signal(sig)
	}
}

func (r *execRunner) reap(err error) {
	if err != nil {
		r.logf("command exited: %v", err)
	} else {
		r.logf("command exited")
	}
	if !r.stopping {
		// It ended on its own while we still lead: start it again soon.
		r.restartAt = time.Now().Add(execRestartWait)
	}
	r.lifeline.Close()
	r.child, r.lifeline, r.childDone, r.exited, r.stopping = nil, nil, nil, nil, false
}

// shutdown stops the child (if any) and returns its exit code.
func (r *execRunner) shutdown() int {
	if r.child == nil {
		return 0
	}
	r.stopChild()
	err := <-r.childDone
	r.lifeline.Close()
	r.child, r.lifeline = nil, nil
	return exitCode(err)
}

// exitCode is the exit code a shell would report for a child that ended
// with err: its own code, or 128+N when signal N killed it.
func exitCode(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return 1
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

func (r *execRunner) poll(ctx context.Context, out chan<- statusUpdate) {
	t := time.NewTicker(execPollInterval)
	defer t.Stop()
	for {
		at := time.Now()
		rctx, cancel := context.WithTimeout(ctx, execPollTimeout)
		st, err := r.c.Status(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- statusUpdate{st: st, at: at, err: err, poll: true}:
		case <-ctx.Done():
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// watch pushes changes the moment the agent announces them.
func (r *execRunner) watch(ctx context.Context, out chan<- statusUpdate) {
	refused := false
	for ctx.Err() == nil {
		w, err := r.c.Watch(ctx)
		var ae *client.Error
		if errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable {
			// The agent is there but serves its most watchers
			// (api.max_watchers): that is no loss of contact. The polls
			// still vouch for the lease, only later.
			if !refused {
				r.logf("the agent refused a watch stream (%v); relying on polls until it accepts one", err)
				refused = true
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		refused = false
		if err == nil {
			for {
				var st api.Status
				if st, err = w.Next(); err != nil {
					break
				}
				select {
				case out <- statusUpdate{st: st, at: time.Now()}:
				case <-ctx.Done():
				}
			}
			w.Close()
		}
		if ctx.Err() == nil {
			// The stream ended or never began: the agent may be gone. Say
			// so at once, with the client's reason (it names the socket).
			select {
			case out <- statusUpdate{at: time.Now(), err: err}:
			case <-ctx.Done():
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
