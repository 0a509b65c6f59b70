package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// Sessions (docs/elections.md, "Sessions"): on an election whose
// candidacy is "session", exec holds a session while it runs its command,
// so the agent stands only while the command does. It opens the session
// before waiting for leadership and closes it when the command exits on
// its own, so that another agent's holder takes over within an election
// timeout. With session_ttl, the command must also check in: exec hands it
// a watchdog as systemd does (NOTIFY_SOCKET, WATCHDOG_USEC) and relays
// each WATCHDOG=1 it sends as a heartbeat, so a command that hangs (or is
// stopped) lets its session expire and leadership move, while the agent's
// other elections stay put.

// How exec learned the election stands.
const (
	sessionsUnknown = iota // not asked yet, or the agent did not answer
	sessionsOff            // candidacy "always" (or an agent without sessions)
	sessionsOn             // candidacy "session": exec holds one
)

// execSessionRetry is how long exec waits before campaigning again after
// a campaign failed or the agent ended a session for another reason than
// expiry.
const execSessionRetry = time.Second

// sessionResult is what a campaign brought.
type sessionResult struct {
	s   *client.Session
	err error
}

// sessionState is exec's part of the session, owned by its loop.
type sessionState struct {
	mode    int
	sess    *client.Session
	opening bool
	retryAt time.Time
	opened  chan sessionResult
	// hbBusy is set while a heartbeat is in flight: pings that arrive
	// meanwhile are folded into it.
	hbBusy bool
	hbDone chan error
	wd     *watchdog // made at the first session with a TTL
	// beatAt is when exec checks in itself next: it holds the session
	// alone while no command runs (or one is being stopped), so it keeps
	// it alive then; a running command's own pings keep it otherwise.
	beatAt time.Time
	// started is the command whose start exec checked in for, so that a
	// new command has a whole TTL to send its first WATCHDOG=1, as
	// systemd's watchdog counts from a service's start.
	started *exec.Cmd
}

// nextBeat is when exec checks in itself next, zero for never.
func (r *execRunner) nextBeat() time.Time {
	if r.ss.sess == nil || r.ss.sess.TTL() <= 0 || (r.child != nil && !r.stopping) {
		return time.Time{}
	}
	return r.ss.beatAt
}

// sessionDone is the open session's Done, nil (never ready) without one.
func (r *execRunner) sessionDone() <-chan struct{} {
	if r.ss.sess == nil {
		return nil
	}
	return r.ss.sess.Done()
}

// pings is the watchdog's WATCHDOG=1 channel, nil without one.
func (r *execRunner) pings() <-chan struct{} {
	if r.ss.wd == nil {
		return nil
	}
	return r.ss.wd.pings
}

// mayLead reports whether exec may run the command when its agent leads:
// on a session election only while it holds a session.
func (r *execRunner) mayLead() bool {
	switch r.ss.mode {
	case sessionsOff:
		return true
	case sessionsOn:
		return r.ss.sess != nil
	}
	return false
}

// reconcileSession campaigns when exec should hold a session and holds
// none: always, but for the pause between the command exiting on its own
// and its restart. It checks in for a session it holds alone.
func (r *execRunner) reconcileSession(ctx context.Context, wg *sync.WaitGroup, now time.Time) {
	ss := &r.ss
	if ss.sess != nil && ss.sess.TTL() > 0 {
		switch {
		case r.child != nil && !r.stopping && ss.started != r.child:
			ss.started = r.child
			r.ping(ctx, wg)
		case (r.child == nil || r.stopping) && !now.Before(ss.beatAt):
			ss.beatAt = now.Add(ss.sess.TTL() / 3)
			r.ping(ctx, wg)
		}
	}
	if ss.mode == sessionsOff || ss.sess != nil || ss.opening || now.Before(ss.retryAt) {
		return
	}
	if r.child == nil && now.Before(r.restartAt) {
		return
	}
	ss.opening = true
	out := ss.opened
	wg.Go(func() {
		s, err := r.c.Campaign(ctx)
		select {
		case out <- sessionResult{s, err}:
		case <-ctx.Done():
			if s != nil {
				s.Close()
			}
		}
	})
}

// onCampaign takes in what a campaign brought.
func (r *execRunner) onCampaign(res sessionResult, now time.Time) {
	ss := &r.ss
	ss.opening = false
	var ae *client.Error
	switch {
	case res.err == nil:
		if ss.mode != sessionsOn {
			r.logf("election %s's candidacy is held by sessions: holding one while the command runs", r.c.ElectionName())
		}
		ss.mode, ss.sess, ss.beatAt = sessionsOn, res.s, now.Add(res.s.TTL()/3)
		if ttl := res.s.TTL(); ttl > 0 && ss.wd == nil {
			wd, err := newWatchdog()
			if err != nil {
				// Without a watchdog the command cannot check in, and
				// its session would expire every TTL: stop here.
				r.logf("cannot give the command a watchdog (%v); closing the session", err)
				ss.sess.Close()
				ss.sess = nil
				ss.retryAt = now.Add(execSessionRetry)
				return
			}
			ss.wd = wd
		}
		if ss.wd != nil {
			// A command started before now sent nothing yet: the TTL
			// counts from the campaign.
			r.logf("session %s open; the command checks in with WATCHDOG=1 on $NOTIFY_SOCKET within session_ttl %s", res.s.ID(), res.s.TTL())
		}
	case errors.As(res.err, &ae) && ae.StatusCode == http.StatusConflict && strings.Contains(ae.Message, "candidacy is not held by sessions"):
		ss.mode = sessionsOff // candidacy "always": exec runs as it always did
	case errors.As(res.err, &ae) && ae.StatusCode == http.StatusNotFound && strings.Contains(ae.Message, "no such endpoint"):
		ss.mode = sessionsOff // an agent from before sessions
	default:
		// Not a voter, too many sessions, the agent down: say so and
		// try again.
		ss.retryAt = now.Add(execSessionRetry)
		if !errors.As(res.err, &ae) {
			return // the agent is down: the "down" report says so
		}
		if ae.StatusCode == http.StatusConflict {
			ss.mode = sessionsOn
		}
		r.report("session", fmt.Sprintf("cannot campaign: %v; trying again", res.err), now)
	}
}

// onSessionEnd handles the agent ending the session: an expired one stops
// the command, as a lost leadership does, and exec campaigns again.
func (r *execRunner) onSessionEnd(now time.Time) {
	ss := &r.ss
	s := ss.sess
	ss.sess = nil
	s.Close()
	if s.Reason() != api.SessionExpired {
		r.logf("session %s ended (%v); campaigning again", s.ID(), s.Err())
		ss.retryAt = now.Add(execSessionRetry)
	} else {
		r.logf("session %s expired: the command sent no WATCHDOG=1 within session_ttl %s; stopping it and campaigning again", s.ID(), s.TTL())
	}
	if r.child != nil && !r.stopping {
		r.stopChild()
	}
}

// closeSession ends the session exec holds, if any.
func (r *execRunner) closeSession(why string) {
	if r.ss.sess == nil {
		return
	}
	if why != "" {
		r.logf("closing session %s: %s", r.ss.sess.ID(), why)
	}
	r.ss.sess.Close()
	r.ss.sess = nil
}

// ping relays a WATCHDOG=1 from the command as a heartbeat.
func (r *execRunner) ping(ctx context.Context, wg *sync.WaitGroup) {
	ss := &r.ss
	if ss.sess == nil || ss.hbBusy {
		return
	}
	ss.hbBusy = true
	s, done := ss.sess, ss.hbDone
	wg.Go(func() {
		hctx, cancel := context.WithTimeout(ctx, max(s.TTL()/2, execPollTimeout))
		err := s.Heartbeat(hctx)
		cancel()
		select {
		case done <- err:
		case <-ctx.Done():
		}
	})
}

// onHeartbeat takes in a heartbeat's answer. An ended session is no news:
// its stream says so too, and onSessionEnd acts on that.
func (r *execRunner) onHeartbeat(err error) {
	r.ss.hbBusy = false
	if err != nil && !errors.Is(err, client.ErrSessionEnded) {
		r.logf("relaying the command's WATCHDOG=1: %v", err)
	}
}

// sessionEnv is the command's environment on a session election with a
// TTL: the watchdog's socket and period, as systemd gives a service with
// WatchdogSec. Whatever of those exec itself inherited (it may run under
// systemd) is replaced. WATCHDOG_PID is left out: the command's pid is not
// known before it starts, and a wrong one makes sd_watchdog_enabled()
// report no watchdog; without it, any process of the command may ping.
func (r *execRunner) sessionEnv(env []string) []string {
	if r.ss.wd == nil || r.ss.sess == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CONCLAVE_WATCHDOG_USEC":
			continue
		}
		out = append(out, kv)
	}
	usec := strconv.FormatInt((r.ss.sess.TTL() / 2).Microseconds(), 10)
	return append(out, "NOTIFY_SOCKET="+r.ss.wd.path, "WATCHDOG_USEC="+usec, "CONCLAVE_WATCHDOG_USEC="+usec)
}

// stopSessions closes the session and the watchdog when exec ends.
func (r *execRunner) stopSessions() {
	r.closeSession("")
	if r.ss.wd != nil {
		r.ss.wd.close()
		r.ss.wd = nil
	}
}

// watchdog is the unixgram socket the command sends sd_notify datagrams
// to. It is made in a directory of its own of mode 0700, so only exec's
// user (and root) can ping it.
type watchdog struct {
	dir   string
	path  string
	conn  *net.UnixConn
	pings chan struct{}
	done  chan struct{}
}

// maxNotifyDatagram bounds an sd_notify datagram read; systemd's own
// bound is larger, but exec reads only WATCHDOG=1 from it.
const maxNotifyDatagram = 4 << 10

func newWatchdog() (*watchdog, error) {
	dir, err := os.MkdirTemp("", "conclave-exec-")
	if err != nil {
		return nil, fmt.Errorf("create the watchdog's directory: %w", err)
	}
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("listen on the watchdog socket: %w", err)
	}
	wd := &watchdog{dir: dir, path: path, conn: conn, pings: make(chan struct{}, 1), done: make(chan struct{})}
	go wd.read()
	return wd, nil
}

// read turns each datagram holding WATCHDOG=1 into a ping; pings not yet
// taken are folded into one.
func (wd *watchdog) read() {
	defer close(wd.done)
	buf := make([]byte, maxNotifyDatagram)
	for {
		n, _, err := wd.conn.ReadFromUnix(buf)
		if err != nil {
			return // closed
		}
		for line := range strings.SplitSeq(string(buf[:n]), "\n") {
			if strings.TrimSpace(line) == "WATCHDOG=1" {
				select {
				case wd.pings <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (wd *watchdog) close() {
	wd.conn.Close()
	<-wd.done
	os.RemoveAll(wd.dir)
}
