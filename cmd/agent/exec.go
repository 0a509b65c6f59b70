package main

import (
	"context"
	"errors"
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
	// A report of what exec waits for is repeated, unchanged, only this
	// often; one that changed waits at least execReportGap after the
	// last of its kind, so a flapping leader cannot flood stderr.
	execReportRepeat = time.Minute
	execReportGap    = 2 * time.Second
)

func runExec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("exec", stderr)
	var socket string
	socketFlag(fs, &socket)
	var election electionName
	electionFlag(fs, &election)
	grace := fs.Duration("grace", 5*time.Second, "after SIGTERM, wait this long before SIGKILL")
	quiet := fs.Bool("quiet", false, "do not report on stderr what exec waits for and does")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if len(words) == 0 {
		fmt.Fprintf(stderr, "agent exec: no command to run: give it after the flags, as in: agent exec -- CMD ARGS…\nRun 'agent exec -h' for its flags.\n")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &execRunner{
		c: client.New(socket).Election(election.String()), argv: words, quiet: *quiet, grace: *grace,
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
	quiet  bool // -quiet: report nothing, only the command's own output
	stdout io.Writer
	stderr io.Writer

	child     *exec.Cmd     // the guardian that runs the command (guardian.go)
	lifeline  *os.File      // closing it kills the command and all it started
	childDone chan error    // the child's Wait result, read only by the loop
	exited    chan struct{} // closed when the child has been waited for
	epoch     uint64
	stopping  bool
	restartAt time.Time
	reports   map[string]execReport // the last report of each kind
	ss        sessionState          // the session held on a session election (execsession.go)
}

// execReport is the last report of one kind that exec printed.
type execReport struct {
	text string
	at   time.Time
}

func (r *execRunner) logf(format string, args ...any) {
	if r.quiet {
		return
	}
	fmt.Fprintf(r.stderr, "agent exec: "+format+"\n", args...)
}

// report prints a state exec is in while the command is not running (kind
// "wait": another node leads; "down": the agent does not answer), rate-
// limited: the same text again only after execReportRepeat, a new one no
// sooner than execReportGap after the last of its kind. Reports are made
// on every answer (ten a second), so one held back is printed at the next
// answer after the gap.
func (r *execRunner) report(kind, text string, now time.Time) {
	last, ok := r.reports[kind]
	switch {
	case !ok:
	case last.text == text && now.Sub(last.at) < execReportRepeat:
		return
	case last.text != text && now.Sub(last.at) < execReportGap:
		return
	}
	if r.reports == nil {
		r.reports = map[string]execReport{}
	}
	r.reports[kind] = execReport{text: text, at: now}
	if kind == "down" {
		delete(r.reports, "wait") // once it answers again, say at once what it answers
	} else {
		delete(r.reports, "down")
	}
	r.logf("%s", text)
}

// waiting says, rate-limited, why the command is not running: who leads
// instead, or that the agent does not answer.
func (r *execRunner) waiting(v *client.Leadership, now time.Time) {
	if err := v.Err(); err != nil {
		r.report("down", fmt.Sprintf("cannot reach the agent (%s); the command starts once it answers and this node leads",
			explain("exec", r.c.Socket(), err)), now)
		return
	}
	st := v.Status()
	switch {
	case st.Node == "":
		return // no answer yet
	case st.Leader == "":
		r.report("wait", fmt.Sprintf("waiting for leadership: %s is %s, no leader yet (epoch %d)", st.Node, st.Role, st.Epoch), now)
	case st.Leader == st.Node:
		// It leads, but the answer does not vouch for it yet (a stale
		// poll, a lease not confirmed): the next poll decides.
	default:
		r.report("wait", fmt.Sprintf("waiting for leadership: %s leads epoch %d, this node %s is %s", st.Leader, st.Epoch, st.Node, st.Role), now)
	}
}

func (r *execRunner) run(ctx context.Context) int {
	updates := make(chan statusUpdate, 16)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { r.poll(pctx, updates) })
	wg.Go(func() { r.watch(pctx, updates) })
	r.ss.opened, r.ss.hbDone = make(chan sessionResult), make(chan error)
	defer r.stopSessions() // after the command is stopped: it held the session

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
			if u.err != nil && view.Err() == nil && r.child != nil {
				r.logf("lost contact with the agent: %v", u.err)
			}
			u.apply(&view)
		case <-wake.C:
		case sig := <-forward:
			r.signalChild(sig.(syscall.Signal))
		case err := <-r.childDone:
			r.reap(err)
		case res := <-r.ss.opened:
			r.onCampaign(res, time.Now())
		case <-r.sessionDone():
			r.onSessionEnd(time.Now())
		case <-r.pings():
			r.ping(pctx, &wg)
		case err := <-r.ss.hbDone:
			r.onHeartbeat(err)
		}
		r.reconcile(&view)
		r.reconcileSession(pctx, &wg, time.Now())
		// Wake at the lease's end while leading, and when a restart or a
		// campaign is due; otherwise only answers (a poll every 100 ms)
		// move anything.
		now := time.Now()
		next := now.Add(time.Hour)
		if view.Leads(now) {
			next = view.Deadline()
		}
		if r.child == nil && r.restartAt.After(now) && r.restartAt.Before(next) {
			next = r.restartAt
		}
		for _, at := range []time.Time{r.ss.retryAt, r.nextBeat()} {
			if at.After(now) && at.Before(next) {
				next = at
			}
		}
		wake.Reset(max(next.Sub(now), time.Millisecond))
	}
}

func (r *execRunner) reconcile(v *client.Leadership) {
	now := time.Now()
	want := v.Leads(now) && r.mayLead()
	if r.child != nil {
		if !r.stopping && (!want || v.Status().Epoch != r.epoch) {
			r.logf("leadership of epoch %d lost: stopping the command", r.epoch)
			r.stopChild()
		}
		return
	}
	if want && !now.Before(r.restartAt) {
		r.startChild(v.Status())
		return
	}
	if !want {
		r.waiting(v, now)
	}
}

func (r *execRunner) startChild(st api.Status) {
	env := append(os.Environ(), "CONCLAVE_EPOCH="+strconv.FormatUint(st.Epoch, 10), "CONCLAVE_LEADER="+st.Leader,
		"CONCLAVE_ELECTION="+r.c.ElectionName())
	env = r.sessionEnv(env)
	cmd, pid, lifeline, err := startGuarded(r.argv, env, os.Stdin, r.stdout, r.stderr)
	if err != nil {
		r.logf("cannot start %s: %v", r.argv[0], err)
		r.restartAt = time.Now().Add(execRestartWait)
		return
	}
	r.logf("leading in epoch %d: started %s (pid %d)", st.Epoch, r.argv[0], pid)
	r.reports = nil // once it stops, say at once what exec waits for
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
	r.logExit(err)
	if !r.stopping {
		// It ended on its own while we still lead: start it again soon.
		// Its session goes with it, so another agent's holder can lead
		// meanwhile; exec campaigns again when the restart is due.
		r.restartAt = time.Now().Add(execRestartWait)
		r.closeSession("the command exited")
	}
	r.lifeline.Close()
	r.child, r.lifeline, r.childDone, r.exited, r.stopping = nil, nil, nil, nil, false
}

// logExit reports the command's end, with its epoch.
func (r *execRunner) logExit(err error) {
	if err != nil {
		r.logf("command exited: %v (epoch %d)", err, r.epoch)
	} else {
		r.logf("command exited (epoch %d)", r.epoch)
	}
}

// shutdown stops the child (if any) and returns its exit code.
func (r *execRunner) shutdown() int {
	if r.child == nil {
		return 0
	}
	r.logf("stopping the command of epoch %d: exec itself is stopping", r.epoch)
	r.stopChild()
	err := <-r.childDone
	r.logExit(err)
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
