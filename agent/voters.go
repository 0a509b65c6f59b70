package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/transport"
)

// Voter changes at runtime (docs/voters.md). This file is the
// agent's I/O only: the protocol decides whether a change is safe and the
// core (core/voters.go) what may be proposed and how disagreeing members
// are treated; the agent answers the socket, forwards to the leader over
// the transport when it is another member, and waits until the change is
// committed. Everything that reads or changes election state runs on the
// loop through a.do.

var _ localapi.VoterBackend = backend{}

// queryTimeout bounds asking the leader for its voters; past it a
// follower answers with its own view.
const queryTimeout = 2 * time.Second

// Voters implements localapi.VoterBackend. A follower or an observer asks
// the leader, whose committed set is the one that counts (an observer
// gets no heartbeats, so its own copy lags), and answers with its own view
// when it cannot.
func (b backend) Voters(ctx context.Context) (api.Voters, error) {
	a := b.a
	var (
		v      api.Voters
		leader protocols.ID
		name   string
	)
	e, err := a.electionOf(ctx)
	if err != nil {
		return v, err
	}
	if doErr := a.do(ctx, func() {
		now := a.now()
		if v, err = e.core.Voters(now); err == nil {
			leader, name, _ = e.core.VoterLeader(now)
		} else {
			err = a.votersErr(e, err)
		}
	}); doErr != nil {
		return v, doErr
	}
	if err != nil || leader == protocols.None || leader == a.self.ID {
		return v, err
	}
	fw, ok := a.tr.(transport.Forwarder)
	if !ok {
		return v, nil
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rep, ferr := fw.ForwardVoters(qctx, leader, transport.VoterRequest{Election: wireElection(e)})
	if ferr != nil || rep.Code != transport.ForwardOK {
		return v, nil
	}
	lv := api.Voters{Index: rep.Index, Term: rep.Term, Voters: splitVoters(rep.Voters), Leader: name}
	if lv.Voters == nil {
		lv.Voters = []string{}
	}
	if rep.PendingIndex != 0 || rep.PendingVoters != "" {
		lv.Pending = &api.PendingVoters{Index: rep.PendingIndex, Term: rep.PendingTerm, Voters: splitVoters(rep.PendingVoters)}
	}
	return lv, nil
}

// ChangeVoters implements localapi.VoterBackend: the leader applies the
// change, any other agent forwards it to the leader.
func (b backend) ChangeVoters(ctx context.Context, c api.VoterChange) (api.Voters, error) {
	a := b.a
	var (
		leader protocols.ID
		name   string
	)
	e, err := a.electionOf(ctx)
	if err != nil {
		return api.Voters{}, err
	}
	if doErr := a.do(ctx, func() { leader, name, err = a.voterLeader(e, a.now()) }); doErr != nil {
		return api.Voters{}, doErr
	}
	if err != nil {
		return api.Voters{}, err
	}
	if leader == a.self.ID {
		return a.changeVoters(ctx, e, protocols.VoterChange{Add: c.Add, Remove: c.Remove})
	}
	return a.forwardVoters(ctx, e, leader, name, c)
}

// voterLeader returns the leader a change of e's voters must go to. Runs
// on the loop.
func (a *Agent) voterLeader(e *election, now protocols.Time) (protocols.ID, string, error) {
	id, name, err := e.core.VoterLeader(now)
	return id, name, a.votersErr(e, err)
}

// wireElection is e's name as the transport's forwarded requests carry
// it: "" for the default election, which agents up to v0.1.0 serve.
func wireElection(e *election) string {
	if e.name == config.DefaultElection {
		return ""
	}
	return e.name
}

// votersErr turns the core's refusals into socket answers.
func (a *Agent) votersErr(e *election, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, core.ErrNoVoters):
		return fmt.Errorf("%w (election %s runs protocol %q)", localapi.ErrNoVoters, e.name, a.protocolOf(e))
	case errors.Is(err, core.ErrNoLeader):
		return unavailable(err.Error())
	case errors.Is(err, core.ErrChangeRefused):
		return fmt.Errorf("%w: %s", localapi.ErrRefused, strings.TrimPrefix(err.Error(), core.ErrChangeRefused.Error()+": "))
	case errors.Is(err, core.ErrReplaced), errors.Is(err, core.ErrNotLeading):
		return unavailable(err.Error())
	}
	return err
}

// changeVoters applies c on this agent, which must lead, and waits until
// the core settles it (committed, or why not) or ctx ends. The retry of an
// add the protocol cannot count yet and the wait for the commit are the
// core's (core.Node.ProposeVoters).
func (a *Agent) changeVoters(ctx context.Context, e *election, c protocols.VoterChange) (api.Voters, error) {
	var (
		token uint64
		err   error
		done  = make(chan core.VoterResult, 1)
	)
	doErr := a.do(ctx, func() {
		if token, err = e.core.ProposeVoters(a.now(), c); err == nil {
			e.voterWaits[token] = done
		}
	})
	if doErr != nil {
		return api.Voters{}, doErr
	}
	if err != nil {
		return api.Voters{}, a.explainVoterChange(e, c, err)
	}
	select {
	case res := <-done:
		if res.Err != nil {
			return api.Voters{}, a.explainVoterChange(e, c, res.Err)
		}
		return res.Voters, nil
	case <-ctx.Done():
		// The loop may have gone; nobody reads the channel (buffered)
		// then, and the entry goes with the agent.
		_ = a.do(context.Background(), func() { delete(e.voterWaits, token) })
		return api.Voters{}, fmt.Errorf("voter change not committed yet (check 'agent voters'): %w", ctx.Err())
	}
}

// explainVoterChange turns the core's and the protocol's refusals into
// an answer that says what to do.
func (a *Agent) explainVoterChange(e *election, c protocols.VoterChange, err error) error {
	switch {
	case errors.Is(err, core.ErrNoVoters), errors.Is(err, core.ErrChangeRefused),
		errors.Is(err, core.ErrReplaced), errors.Is(err, core.ErrNotLeading):
		return a.votersErr(e, err)
	case errors.Is(err, core.ErrTooManyVoterRequests):
		return fmt.Errorf("%w: %v", localapi.ErrRefused, err)
	case errors.Is(err, protocols.ErrNotLeader):
		return unavailable("this agent stopped leading before it could take the change; retry")
	case errors.Is(err, protocols.ErrChangeInFlight):
		return fmt.Errorf("%w: a change is already in flight (%v); wait until 'agent voters' shows no pending change, then retry", localapi.ErrRefused, err)
	case errors.Is(err, protocols.ErrUnknownMember) && c.Add != "":
		return fmt.Errorf("%w: cannot add %q: %v", localapi.ErrRefused, c.Add, err)
	case errors.Is(err, protocols.ErrUnknownMember):
		return fmt.Errorf("%w: cannot remove %q: %v ('agent voters' lists the voters)", localapi.ErrRefused, c.Remove, err)
	case errors.Is(err, protocols.ErrWouldLoseQuorum):
		return fmt.Errorf("%w: the change would lose the quorum: %v; bring the missing voters back first, or remove dead voters one at a time while a majority is up", localapi.ErrRefused, err)
	default:
		return fmt.Errorf("%w: %v", localapi.ErrRefused, err)
	}
}

// forwardVoters sends a change to the leader over the transport.
func (a *Agent) forwardVoters(ctx context.Context, e *election, leader protocols.ID, name string, c api.VoterChange) (api.Voters, error) {
	fw, ok := a.tr.(transport.Forwarder)
	if !ok {
		return api.Voters{}, unavailable(fmt.Sprintf("this agent's transport cannot forward to the leader %s: run the command on the leader's agent", name))
	}
	rep, err := fw.ForwardVoters(ctx, leader, transport.VoterRequest{Election: wireElection(e), Add: c.Add, Remove: c.Remove})
	if err != nil {
		return api.Voters{}, unavailable(fmt.Sprintf("could not reach the leader %s: %v", name, err))
	}
	switch rep.Code {
	case transport.ForwardOK:
	case transport.ForwardRefused:
		return api.Voters{}, fmt.Errorf("%w: the leader %s refused: %s", localapi.ErrRefused, rep.Leader, rep.Error)
	case transport.ForwardNotLeader:
		return api.Voters{}, unavailable(fmt.Sprintf("%s no longer leads: %s; retry", name, rep.Error))
	case transport.ForwardBadRequest:
		return api.Voters{}, fmt.Errorf("%w: the leader %s: %s", localapi.ErrRefused, rep.Leader, rep.Error)
	default:
		return api.Voters{}, unavailable(fmt.Sprintf("the leader %s: %s", rep.Leader, rep.Error))
	}
	var vs []string
	if cfg, err := protocols.NewConfiguration(rep.Term, rep.Index, splitVoters(rep.Voters)); err == nil {
		vs = cfg.VoterList()
	}
	if vs == nil {
		vs = []string{}
	}
	return api.Voters{Index: rep.Index, Term: rep.Term, Voters: vs, Leader: rep.Leader}, nil
}

func splitVoters(s string) []string {
	c := protocols.Configuration{Voters: s}
	return c.VoterList()
}

// serveVoterForwards answers changes other members forward to this agent.
// Called once from New; a transport that cannot forward leaves nothing to
// serve.
func (a *Agent) serveVoterForwards() {
	fw, ok := a.tr.(transport.Forwarder)
	if !ok {
		return
	}
	fw.HandleVoters(func(ctx context.Context, from protocols.ID, req transport.VoterRequest) transport.VoterReply {
		rep := transport.VoterReply{Leader: a.self.Name}
		name := req.Election
		if name == "" {
			name = config.DefaultElection
		}
		e := a.electionNamed(name)
		if e == nil {
			rep.Code, rep.Error = transport.ForwardBadRequest, fmt.Sprintf("%s runs no election %q", a.self.Name, name)
			return rep
		}
		if req.Add == "" && req.Remove == "" {
			return a.answerVotersQuery(ctx, e, rep)
		}
		if req.Add != "" && req.Remove != "" {
			rep.Code, rep.Error = transport.ForwardBadRequest, "name exactly one member to add or to remove"
			return rep
		}
		var (
			leads bool
			err   error
		)
		if doErr := a.do(ctx, func() {
			leader, _, lerr := a.voterLeader(e, a.now())
			leads, err = leader == a.self.ID, lerr
		}); doErr != nil {
			rep.Code, rep.Error = transport.ForwardUnavailable, doErr.Error()
			return rep
		}
		if err == nil && !leads {
			rep.Code, rep.Error = transport.ForwardNotLeader, a.self.Name+" does not lead"
			return rep
		}
		var v api.Voters
		if err == nil {
			a.log.Info("voter change forwarded", zap.Uint64("from", uint64(from)), zap.String("add", req.Add), zap.String("remove", req.Remove))
			v, err = a.changeVoters(ctx, e, protocols.VoterChange{Add: req.Add, Remove: req.Remove})
		}
		switch {
		case err == nil:
			cfg, cerr := protocols.NewConfiguration(v.Term, v.Index, v.Voters)
			if cerr != nil {
				rep.Code, rep.Error = transport.ForwardUnavailable, cerr.Error()
				return rep
			}
			rep.Code, rep.Term, rep.Index, rep.Voters = transport.ForwardOK, cfg.Term, cfg.Index, cfg.Voters
		case errors.Is(err, localapi.ErrRefused):
			rep.Code, rep.Error = transport.ForwardRefused, trimRefused(err)
		default:
			rep.Code, rep.Error = transport.ForwardUnavailable, err.Error()
		}
		if len(rep.Error) > 512 {
			rep.Error = rep.Error[:512] + "…"
		}
		return rep
	})
}

// answerVotersQuery answers a forwarded query with this agent's voter
// configuration, if it leads.
func (a *Agent) answerVotersQuery(ctx context.Context, e *election, rep transport.VoterReply) transport.VoterReply {
	var (
		committed, newest protocols.Configuration
		leads             bool
	)
	if err := a.do(ctx, func() { committed, newest, leads = e.core.LeaderConfigurations(a.now()) }); err != nil {
		rep.Code, rep.Error = transport.ForwardUnavailable, err.Error()
		return rep
	}
	if !leads {
		rep.Code, rep.Error = transport.ForwardNotLeader, a.self.Name+" does not lead"
		return rep
	}
	rep.Code, rep.Term, rep.Index, rep.Voters = transport.ForwardOK, committed.Term, committed.Index, committed.Voters
	if newest != committed && !newest.IsZero() {
		rep.PendingTerm, rep.PendingIndex, rep.PendingVoters = newest.Term, newest.Index, newest.Voters
	}
	return rep
}

// trimRefused drops the "voter change refused: " prefix the follower adds
// again.
func trimRefused(err error) string {
	s := err.Error()
	p := localapi.ErrRefused.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
