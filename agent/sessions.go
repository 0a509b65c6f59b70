package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/localapi"
)

// Sessions (docs/elections.md, "Sessions"): local processes hold an
// election's candidacy through the socket (api.PathCampaign). The core
// decides what a session means and when it expires (core/session.go);
// this file opens, keeps and closes them on the loop, and hands each
// holder the channel on which the core's end of its session arrives
// (election.endSession).

var _ localapi.SessionBackend = backend{}

// sessionID is a session's id on the wire: the election's salt, drawn once
// per agent process, and the core's number. The core numbers sessions
// from 1 in every process, so without the salt a holder from before a
// restart could check in for a stranger's session of the same number.
func (e *election) sessionID(n uint64) string {
	return e.sessionSalt + "-" + strconv.FormatUint(n, 10)
}

// sessionNumber undoes sessionID; false for an id of another process or
// none of this agent's.
func (e *election) sessionNumber(id string) (uint64, bool) {
	salt, num, ok := strings.Cut(id, "-")
	if !ok || e.sessionSalt == "" || salt != e.sessionSalt {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return n, err == nil && n != 0
}

// OpenSession implements localapi.SessionBackend.
func (b backend) OpenSession(ctx context.Context) (localapi.Session, error) {
	a := b.a
	e, err := a.electionOf(ctx)
	if err != nil {
		return localapi.Session{}, err
	}
	// Buffered: the loop hands the end over without waiting for the
	// holder (election.endSession).
	ch := make(chan core.SessionEnd, 1)
	var (
		n       uint64
		openErr error
		id      string
	)
	if err := a.do(ctx, func() {
		if e.sessionSalt == "" {
			var salt [4]byte
			_, _ = rand.Read(salt[:]) // never fails (crypto/rand)
			e.sessionSalt = hex.EncodeToString(salt[:])
		}
		if n, openErr = e.core.OpenSession(a.now()); openErr == nil {
			e.sessions[n] = ch
			id = e.sessionID(n)
		}
	}); err != nil {
		return localapi.Session{}, err
	}
	if openErr != nil {
		return localapi.Session{}, sessionError(e.name, openErr)
	}
	el, _ := a.cfg.ElectionFor(e.name)
	return localapi.Session{
		ID:  id,
		TTL: el.SessionTTL.Std(),
		Wait: func(ctx context.Context) string {
			select {
			case end := <-ch:
				if end.Expired {
					return api.SessionExpired
				}
				return api.SessionStopped
			case <-a.loopDone:
				return api.SessionStopped
			case <-ctx.Done():
				return ""
			}
		},
	}, nil
}

// KeepSession implements localapi.SessionBackend.
func (b backend) KeepSession(ctx context.Context, id string) error {
	a := b.a
	e, err := a.electionOf(ctx)
	if err != nil {
		return err
	}
	var keepErr error
	if err := a.do(ctx, func() {
		n, ok := e.sessionNumber(id)
		if !ok {
			keepErr = core.ErrSessionEnded
			return
		}
		keepErr = e.core.KeepSession(a.now(), n)
	}); err != nil {
		return err
	}
	if keepErr != nil {
		return sessionError(e.name, keepErr)
	}
	return nil
}

// CloseSession implements localapi.SessionBackend. It forgets the
// holder's channel with the session, so a holder that hangs up leaves
// nothing behind on the loop.
func (b backend) CloseSession(ctx context.Context, id string) error {
	a := b.a
	e, err := a.electionOf(ctx)
	if err != nil {
		return err
	}
	return a.do(ctx, func() {
		n, ok := e.sessionNumber(id)
		if !ok {
			return
		}
		delete(e.sessions, n)
		e.core.CloseSession(a.now(), n)
	})
}

// sessionError maps the core's session errors to the socket's, saying
// what to do.
func sessionError(election string, err error) error {
	switch {
	case errors.Is(err, core.ErrNoSessions):
		return localapi.ErrNoSessions // the server says which election and what to set
	case errors.Is(err, core.ErrNotCandidate):
		return fmt.Errorf("%w: %v; campaign on one of the voters' agents, or add this one (agent voters -election %s add NAME)", localapi.ErrNotCandidate, err, election)
	case errors.Is(err, core.ErrSessionEnded):
		return fmt.Errorf("%w: %v", localapi.ErrSessionEnded, err)
	case errors.Is(err, core.ErrTooManySessions):
		return fmt.Errorf("%w: %v", localapi.ErrTooManySessions, err)
	}
	return fmt.Errorf("%w: %v", localapi.ErrUnavailable, err)
}
