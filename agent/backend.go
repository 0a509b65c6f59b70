package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
)

// errStopped answers requests that arrive after the loop ended.
var errStopped = fmt.Errorf("agent is stopping: %w", localapi.ErrUnavailable)

// backend answers the socket API by running each request on the loop, so
// it sees election state between two inputs and never races with them.
type backend struct{ a *Agent }

var _ localapi.Backend = backend{}

// do runs f on the loop goroutine and waits for it.
func (a *Agent) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case a.requests <- func() { f(); close(done) }:
	case <-a.loopDone:
		return errStopped
	case <-ctx.Done():
		return fmt.Errorf("agent loop busy: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-a.loopDone:
		return errStopped
	}
}

func (b backend) Status(ctx context.Context, consistent bool) (api.Status, error) {
	if consistent {
		return b.a.consistentStatus(ctx)
	}
	if st, ok := b.a.loadSnapshot(); ok {
		return st, nil
	}
	var st api.Status
	err := b.a.do(ctx, func() { st = b.a.status(b.a.now()) })
	return st, err
}

// statusSnapshot is the loop's latest answer to GET /v1/status, published
// after every input so that the socket can answer without queueing behind
// the loop: status is the endpoint local processes poll.
type statusSnapshot struct {
	st         api.Status
	leaseUntil protocols.Time // majority's lease; 0 without one
	// origin is when the leader made the claim an observer reports
	// (learned: the status comes from gossip), so that its age is
	// computed at request time.
	origin  protocols.Time
	learned bool
}

// storeSnapshot publishes the current status. It runs on the loop after
// every input, the same moments at which a request through the loop would
// have been answered.
func (a *Agent) storeSnapshot() {
	now := a.now()
	st := a.status(now)
	snap := &statusSnapshot{st: st}
	if _, origin, learned := a.electionStatus(now); learned {
		snap.origin, snap.learned = origin, true
	}
	if st.Role == api.RoleLeader {
		snap.leaseUntil = a.proto.Status(now).LeaseUntil
	}
	a.snapshot.Store(snap)
}

// loadSnapshot answers a status request from the latest snapshot, at the
// time of the request: a leader whose lease has run out since is reported
// as no leader at all, as the protocol itself would (docs/design.md §1.4).
func (a *Agent) loadSnapshot() (api.Status, bool) {
	select {
	case <-a.loopDone:
		return api.Status{}, false // answered by errStopped
	default:
	}
	snap := a.snapshot.Load()
	if snap == nil {
		return api.Status{}, false
	}
	st := snap.st
	if snap.learned {
		st.LeaderAgeMS = a.now().Sub(snap.origin).Milliseconds()
	}
	if snap.leaseUntil != 0 {
		now := a.now()
		if now >= snap.leaseUntil {
			st.Role, st.Leader, st.LeaseMS, st.LeaseNS = api.RoleFollower, "", 0, 0
		} else {
			st.LeaseMS = snap.leaseUntil.Sub(now).Milliseconds()
			st.LeaseNS = int64(snap.leaseUntil.Sub(now))
		}
	}
	return st, true
}

func (b backend) Members(ctx context.Context) ([]api.Member, error) {
	var out []api.Member
	err := b.a.do(ctx, func() { out = b.a.memberList(b.a.now()) })
	return out, err
}

func (b backend) Resign(ctx context.Context) error {
	var err error
	if doErr := b.a.do(ctx, func() { err = b.a.proto.Resign(b.a.now()) }); doErr != nil {
		return doErr
	}
	// The server names the request ("resign: …"); these say why and what
	// to do.
	switch {
	case errors.Is(err, protocols.ErrNotLeader):
		return fmt.Errorf("%w; run resign against the leader's agent ('agent leader' names it)", localapi.ErrNotLeader)
	case errors.Is(err, protocols.ErrNoTransferTarget):
		return unavailable("no other voter is reachable to hand leadership to, so this agent stays leader; start or reconnect another voter first")
	case err != nil:
		return fmt.Errorf("%w: %v", localapi.ErrUnavailable, err)
	}
	return nil
}

func (b backend) Health(ctx context.Context) error {
	return b.a.do(ctx, func() {})
}

// confirmWait is a consistent read waiting for its quorum round.
type confirmWait struct {
	token    uint64
	deadline protocols.Time
	done     chan error
}

// consistentStatus confirms leadership with a fresh quorum round before
// answering (majority only). A follower answers at once: it makes no claim
// that needs confirming.
func (a *Agent) consistentStatus(ctx context.Context) (api.Status, error) {
	confirmer, ok := a.proto.(protocols.Confirmer)
	if !ok {
		return api.Status{}, fmt.Errorf("%w: protocol %q has no quorum to confirm leadership with; only majority does", localapi.ErrConsistentUnsupported, a.cfg.Election.Protocol)
	}
	var (
		wait *confirmWait
		st   api.Status
	)
	err := a.do(ctx, func() {
		now := a.now()
		st = a.status(now)
		if st.Role != api.RoleLeader {
			return
		}
		token, err := confirmer.ConfirmLeadership(now)
		if err != nil {
			st = a.status(now)
			return
		}
		wait = &confirmWait{token: token, deadline: now.Add(a.cfg.Election.ElectionTimeout.Std()), done: make(chan error, 1)}
		a.confirms = append(a.confirms, wait)
	})
	if err != nil || wait == nil {
		return st, err
	}
	select {
	case err := <-wait.done:
		if err != nil {
			return api.Status{}, err
		}
	case <-ctx.Done():
		return api.Status{}, fmt.Errorf("consistent status: %w", ctx.Err())
	}
	err = a.do(ctx, func() { st = a.status(a.now()) })
	return st, err
}

// checkConfirms settles consistent reads after each input.
func (a *Agent) checkConfirms() {
	if len(a.confirms) == 0 {
		return
	}
	confirmer := a.proto.(protocols.Confirmer)
	now := a.now()
	kept := a.confirms[:0]
	for _, w := range a.confirms {
		switch {
		case confirmer.Confirmed(w.token):
			w.done <- nil
		case now >= w.deadline:
			w.done <- fmt.Errorf("%w: no quorum confirmed leadership within %v", localapi.ErrUnavailable, a.cfg.Election.ElectionTimeout.Std())
		case a.proto.Status(now).Role != protocols.Leader:
			w.done <- fmt.Errorf("%w: lost leadership while confirming it", localapi.ErrUnavailable)
		default:
			kept = append(kept, w)
		}
	}
	a.confirms = kept
}

// unavailableError is a 503 whose text is the reason alone: "agent
// unavailable" would suggest the agent is down when it is not.
type unavailableError string

func unavailable(reason string) error { return unavailableError(reason) }

func (e unavailableError) Error() string { return string(e) }

func (e unavailableError) Unwrap() error { return localapi.ErrUnavailable }
