package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
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
	e, err := b.a.electionOf(ctx)
	if err != nil {
		return api.Status{}, err
	}
	if consistent {
		return b.a.consistentStatus(ctx, e)
	}
	if st, ok := b.a.loadSnapshot(e); ok {
		st.Problems = b.a.withKeyProblems(st.Problems)
		return st, nil
	}
	var st api.Status
	err = b.a.do(ctx, func() { st = e.core.Status(b.a.now()) })
	st.Problems = b.a.withKeyProblems(st.Problems)
	return st, err
}

// loadSnapshot answers a status request from e's latest snapshot, at the
// time of the request (core.Snapshot.At).
func (a *Agent) loadSnapshot(e *election) (api.Status, bool) {
	select {
	case <-a.loopDone:
		return api.Status{}, false // answered by errStopped
	default:
	}
	snap := e.snapshot.Load()
	if snap == nil {
		return api.Status{}, false
	}
	return a.withCutOff(snap.At(a.now())), true
}

func (b backend) Members(ctx context.Context) ([]api.Member, error) {
	var out []api.Member
	err := b.a.do(ctx, func() { out = b.a.def().core.Members(b.a.now(), b.a.selfAddr()) })
	return out, err
}

func (b backend) Resign(ctx context.Context) error {
	e, err := b.a.electionOf(ctx)
	if err != nil {
		return err
	}
	if doErr := b.a.do(ctx, func() { err = e.core.Resign(b.a.now()) }); doErr != nil {
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

// consistentStatus confirms leadership with a fresh quorum round before
// answering (majority only). A follower answers at once: it makes no claim
// that needs confirming.
func (a *Agent) consistentStatus(ctx context.Context, e *election) (api.Status, error) {
	var (
		st    api.Status
		done  chan error
		cfErr error
	)
	err := a.do(ctx, func() {
		now := a.now()
		token, wait, err := e.core.ConfirmLeadership(now)
		if err != nil {
			cfErr = err
			return
		}
		if !wait {
			st = e.core.Status(now)
			return
		}
		done = make(chan error, 1)
		e.confirms[token] = append(e.confirms[token], done)
	})
	switch {
	case err != nil:
		return api.Status{}, err
	case errors.Is(cfErr, core.ErrConfirmUnsupported):
		return api.Status{}, fmt.Errorf("%w: protocol %q has no quorum to confirm leadership with; only majority does", localapi.ErrConsistentUnsupported, a.protocolOf(e))
	case cfErr != nil:
		return api.Status{}, fmt.Errorf("%w: %v", localapi.ErrUnavailable, cfErr)
	case done == nil:
		return st, nil
	}
	select {
	case err := <-done:
		if err != nil {
			return api.Status{}, err
		}
	case <-ctx.Done():
		return api.Status{}, fmt.Errorf("consistent status: %w", ctx.Err())
	}
	err = a.do(ctx, func() { st = e.core.Status(a.now()) })
	return st, err
}

// protocolOf is the protocol election e runs.
func (a *Agent) protocolOf(e *election) string {
	el, _ := a.cfg.ElectionFor(e.name)
	return el.Protocol
}

func (a *Agent) selfAddr() string {
	for _, m := range a.cluster.Members() {
		if m.Name == a.self.Name {
			return m.Addr
		}
	}
	return a.cfg.Gossip.Bind
}

// unavailableError is a 503 whose text is the reason alone: "agent
// unavailable" would suggest the agent is down when it is not.
type unavailableError string

func unavailable(reason string) error { return unavailableError(reason) }

func (e unavailableError) Error() string { return string(e) }

func (e unavailableError) Unwrap() error { return localapi.ErrUnavailable }
