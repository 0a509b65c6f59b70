package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/transport"
)

// Voter changes at runtime (issue 14, docs/voters.md). This file is the
// agent's glue only: the protocol (protocols/majority) decides whether a
// change is safe; the agent finds the leader, forwards to it over the
// transport when it is another member, and waits until the change is
// committed. Everything that reads or changes election state runs on the
// loop through a.do.

// commitPoll is how often a change waiting for its commit looks at the
// protocol's status: a heartbeat round (50 ms by default) commits it.
const commitPoll = 10 * time.Millisecond

var _ localapi.VoterBackend = backend{}

// Voters implements localapi.VoterBackend.
func (b backend) Voters(ctx context.Context) (api.Voters, error) {
	var (
		v   api.Voters
		err error
	)
	if doErr := b.a.do(ctx, func() { v, err = b.a.votersView(b.a.now()) }); doErr != nil {
		return v, doErr
	}
	return v, err
}

// ChangeVoters implements localapi.VoterBackend: the leader applies the
// change, any other agent forwards it to the leader.
func (b backend) ChangeVoters(ctx context.Context, c api.VoterChange) (api.Voters, error) {
	a := b.a
	var (
		leader protocols.ID
		name   string
		err    error
	)
	if doErr := a.do(ctx, func() { leader, name, err = a.voterLeader(a.now()) }); doErr != nil {
		return api.Voters{}, doErr
	}
	if err != nil {
		return api.Voters{}, err
	}
	if leader == a.self.ID {
		return a.changeVoters(ctx, protocols.VoterChange{Add: c.Add, Remove: c.Remove})
	}
	return a.forwardVoters(ctx, leader, name, c)
}

// voterLeader returns the leader a change must go to. Runs on the loop.
func (a *Agent) voterLeader(now protocols.Time) (protocols.ID, string, error) {
	if _, ok := a.proto.(protocols.VoterChanger); !ok {
		return protocols.None, "", a.noVoters()
	}
	st, _, _ := a.electionStatus(now)
	if st.Leader == protocols.None {
		return protocols.None, "", unavailable("no leader: a voter change needs a leader to commit it; wait until 'agent leader' names one (a majority of the voters must be up and reachable)")
	}
	return st.Leader, a.leaderName(st), nil
}

func (a *Agent) noVoters() error {
	return fmt.Errorf("%w (this agent runs protocol %q)", localapi.ErrNoVoters, a.cfg.Election.Protocol)
}

// votersView is GET /v1/voters. Runs on the loop.
func (a *Agent) votersView(now protocols.Time) (api.Voters, error) {
	if _, ok := a.proto.(protocols.VoterChanger); !ok {
		return api.Voters{}, a.noVoters()
	}
	st, _, _ := a.electionStatus(now)
	ps := a.proto.Status(now)
	v := api.Voters{
		Index:  ps.Committed.Index,
		Term:   ps.Committed.Term,
		Voters: ps.Committed.VoterList(),
		Leader: a.leaderName(st),
	}
	if v.Voters == nil {
		v.Voters = []string{} // never null on the wire
	}
	if ps.Config != ps.Committed && !ps.Config.IsZero() {
		v.Pending = &api.PendingVoters{Index: ps.Config.Index, Term: ps.Config.Term, Voters: ps.Config.VoterList()}
	}
	return v, nil
}

// changeVoters applies c on this agent, which must lead, and waits until
// the change is committed, fails, or ctx ends.
func (a *Agent) changeVoters(ctx context.Context, c protocols.VoterChange) (api.Voters, error) {
	var (
		target protocols.Configuration
		err    error
	)
	doErr := a.do(ctx, func() {
		now := a.now()
		vc, ok := a.proto.(protocols.VoterChanger)
		if !ok {
			err = a.noVoters()
			return
		}
		if err = a.checkVoterChange(c); err != nil {
			return
		}
		if err = vc.ChangeVoters(now, c); err != nil {
			err = explainVoterChange(c, err)
			return
		}
		target = a.proto.Status(now).Config
		a.log.Info("voter change proposed", zap.String("add", c.Add), zap.String("remove", c.Remove),
			zap.Uint64("index", target.Index), zap.Strings("voters", target.VoterList()))
	})
	if doErr != nil {
		return api.Voters{}, doErr
	}
	if err != nil {
		return api.Voters{}, err
	}
	return a.awaitCommit(ctx, target)
}

// checkVoterChange is the agent's own check before the protocol's: a
// member to be added must be alive and reachable now, since a voter that
// cannot answer weakens the quorum from the moment it is added.
func (a *Agent) checkVoterChange(c protocols.VoterChange) error {
	if c.Add == "" || c.Add == a.self.Name {
		return nil
	}
	m, ok := a.members[c.Add]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q is not a member this leader (%s) knows: start its agent and check 'agent members' lists it", localapi.ErrRefused, c.Add, a.self.Name)
	case m.State != membership.StateAlive && m.State != membership.StateSuspect:
		return fmt.Errorf("%w: %q is %s: start its agent first", localapi.ErrRefused, c.Add, m.State)
	case a.byID[m.ID] != m.Name || !a.tr.Reachable(m.ID):
		return fmt.Errorf("%w: %q is not reachable from the leader (%s) over the election transport: check its [transport] address and the cluster key", localapi.ErrRefused, c.Add, a.self.Name)
	}
	return nil
}

// explainVoterChange turns the protocol's refusal into an answer that says
// what to do.
func explainVoterChange(c protocols.VoterChange, err error) error {
	switch {
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

// awaitCommit waits until the configuration target is committed. It polls
// the protocol on the loop rather than adding a hook to every input: a
// change is rare and commits within a heartbeat round or two.
func (a *Agent) awaitCommit(ctx context.Context, target protocols.Configuration) (api.Voters, error) {
	tick := time.NewTicker(commitPoll)
	defer tick.Stop()
	for {
		var (
			v    api.Voters
			done bool
			err  error
		)
		doErr := a.do(ctx, func() {
			now := a.now()
			st := a.proto.Status(now)
			switch {
			case st.Committed == target:
				v, err = a.votersView(now)
				done = true
			case st.Committed.Compare(target) > 0 || st.Config.Compare(target) > 0 && st.Config.Voters != target.Voters:
				err = unavailable(fmt.Sprintf("configuration %s was replaced by %s before it committed; check 'agent voters'", target, st.Config))
				done = true
			case st.Role != protocols.Leader:
				err = unavailable(fmt.Sprintf("this agent stopped leading before configuration %s committed; it may still commit under the next leader: check 'agent voters'", target))
				done = true
			}
		})
		if doErr != nil {
			return api.Voters{}, doErr
		}
		if done {
			if err == nil {
				a.log.Info("voter change committed", zap.Uint64("index", target.Index), zap.Strings("voters", target.VoterList()))
			}
			return v, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return api.Voters{}, fmt.Errorf("configuration %s not committed yet: %w", target, ctx.Err())
		}
	}
}

// forwardVoters sends a change to the leader over the transport.
func (a *Agent) forwardVoters(ctx context.Context, leader protocols.ID, name string, c api.VoterChange) (api.Voters, error) {
	fw, ok := a.tr.(transport.Forwarder)
	if !ok {
		return api.Voters{}, unavailable(fmt.Sprintf("this agent's transport cannot forward to the leader %s: run the command on the leader's agent", name))
	}
	rep, err := fw.ForwardVoters(ctx, leader, transport.VoterRequest{Add: c.Add, Remove: c.Remove})
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
		if (req.Add == "") == (req.Remove == "") {
			rep.Code, rep.Error = transport.ForwardBadRequest, "name exactly one member to add or to remove"
			return rep
		}
		var (
			leads bool
			err   error
		)
		if doErr := a.do(ctx, func() {
			leader, _, lerr := a.voterLeader(a.now())
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
			v, err = a.changeVoters(ctx, protocols.VoterChange{Add: req.Add, Remove: req.Remove})
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

// problems is the status's problems list: the configuration conflicts the
// protocol met. Runs on the loop.
func (a *Agent) problems() api.Problems {
	vc, ok := a.proto.(protocols.VoterChanger)
	if !ok {
		return ""
	}
	return api.NewProblems(vc.Problems())
}

// removedGrace is how long a member removed from the voters keeps getting
// the leader's messages over the transport: long enough for the heartbeat
// that tells it its removal is committed, after which it is an observer
// for good and learns the leader by gossip like any other.
const removedGrace = 10 * time.Second

// voterTrack follows the protocol's voter configuration for the observers'
// fast path, which otherwise knows only the config file's list: a member
// added at runtime must get heartbeats (they carry the configuration), and
// a removed one must hear that its removal committed.
type voterTrack struct {
	conf    protocols.Configuration
	removed map[string]protocols.Time // name → end of its grace
}

// currentVoter reports whether name is a voter of the protocol's newest or
// committed configuration, or was removed from it less than removedGrace
// ago. Runs on the loop.
func (a *Agent) currentVoter(name string) bool {
	if _, ok := a.proto.(protocols.VoterChanger); !ok {
		return false
	}
	now := a.now()
	st := a.proto.Status(now)
	t := &a.voters
	if st.Config != t.conf {
		for v, until := range t.removed {
			if now >= until {
				delete(t.removed, v) // bounded by the members removed within the grace
			}
		}
		for _, v := range t.conf.VoterList() {
			if !st.Config.Has(v) {
				if t.removed == nil {
					t.removed = make(map[string]protocols.Time)
				}
				t.removed[v] = now.Add(removedGrace)
			}
		}
		t.conf = st.Config
	}
	if st.Config.Has(name) || st.Committed.Has(name) {
		return true
	}
	until, ok := t.removed[name]
	if ok && now >= until {
		delete(t.removed, name)
		return false
	}
	return ok
}
