package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
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
		err    error
		leader protocols.ID
		name   string
	)
	if doErr := a.do(ctx, func() {
		now := a.now()
		if v, err = a.votersView(now); err == nil {
			leader, name, _ = a.voterLeader(now)
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
	rep, ferr := fw.ForwardVoters(qctx, leader, transport.VoterRequest{})
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
		if _, ok := a.proto.(protocols.VoterChanger); !ok {
			err = a.noVoters()
			return
		}
		if err = a.checkVoterChange(c); err != nil {
			return
		}
		if c.Add != "" {
			// The protocol counts the new member towards the new
			// set's quorum only once it answered heartbeats, and the
			// observers' fast path sends it none yet: let it have
			// them from now on.
			a.voters.heartbeat(c.Add, now.Add(removedGrace))
		}
	})
	if doErr != nil {
		return api.Voters{}, doErr
	}
	if err != nil {
		return api.Voters{}, err
	}
	// A member being added answers its first heartbeats within a round
	// or two; until then the protocol may say the change would lose the
	// quorum (adding a second voter to a cluster of one).
	retryUntil := time.Now().Add(2 * a.cfg.Election.ElectionTimeout.Std())
	for {
		doErr = a.do(ctx, func() {
			now := a.now()
			vc, ok := a.proto.(protocols.VoterChanger)
			if !ok {
				err = a.noVoters()
				return
			}
			if err = vc.ChangeVoters(now, c); err != nil {
				return
			}
			target = a.proto.Status(now).Config
			a.log.Info("voter change proposed", zap.String("add", c.Add), zap.String("remove", c.Remove),
				zap.Uint64("index", target.Index), zap.Strings("voters", target.VoterList()))
		})
		if doErr != nil {
			return api.Voters{}, doErr
		}
		if c.Add == "" || !errors.Is(err, protocols.ErrWouldLoseQuorum) || time.Now().After(retryUntil) {
			break
		}
		select {
		case <-time.After(commitPoll):
		case <-ctx.Done():
			return api.Voters{}, fmt.Errorf("voter change: %w", ctx.Err())
		}
	}
	if err != nil {
		return api.Voters{}, explainVoterChange(c, err)
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
		if req.Add == "" && req.Remove == "" {
			return a.answerVotersQuery(ctx, rep)
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

// answerVotersQuery answers a forwarded query with this agent's voter
// configuration, if it leads.
func (a *Agent) answerVotersQuery(ctx context.Context, rep transport.VoterReply) transport.VoterReply {
	var (
		st    protocols.Status
		leads bool
	)
	if err := a.do(ctx, func() {
		now := a.now()
		leader, _, err := a.voterLeader(now)
		leads = err == nil && leader == a.self.ID
		st = a.proto.Status(now)
	}); err != nil {
		rep.Code, rep.Error = transport.ForwardUnavailable, err.Error()
		return rep
	}
	if !leads {
		rep.Code, rep.Error = transport.ForwardNotLeader, a.self.Name+" does not lead"
		return rep
	}
	rep.Code, rep.Term, rep.Index, rep.Voters = transport.ForwardOK, st.Committed.Term, st.Committed.Index, st.Committed.Voters
	if st.Config != st.Committed && !st.Config.IsZero() {
		rep.PendingTerm, rep.PendingIndex, rep.PendingVoters = st.Config.Term, st.Config.Index, st.Config.Voters
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

// problems is the status's problems list: the members whose settings
// digest disagrees with this agent's now, then the configuration conflicts
// the protocol met. Runs on the loop.
func (a *Agent) problems() api.Problems {
	var lines []string
	if len(a.voters.conflicts) > 0 {
		names := make([]string, 0, len(a.voters.conflicts))
		for name := range a.voters.conflicts {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if l := a.voters.conflicts[name].line; l != "" {
				lines = append(lines, l)
			}
		}
	}
	if vc, ok := a.proto.(protocols.VoterChanger); ok {
		lines = append(lines, vc.Problems()...)
	}
	if len(lines) == 0 {
		return ""
	}
	return api.NewProblems(lines)
}

// The settings digest (docs/voters.md, "Disagreement is caught"): what
// must agree cluster-wide, published in gossip metadata as
//
//	SETTINGS|TERM.INDEX|VOTERS
//
// SETTINGS names the protocol and the settings whose mismatch breaks its
// guarantees (majority: the election timeout, on which the lease rests;
// ring: the algorithm); TERM.INDEX and VOTERS are the newest voter
// configuration (majority; VOTERS is "#" and a hash when the list is too
// long for the metadata budget).

// maxDigestVoters is the longest voter list published as is.
const maxDigestVoters = 120

// seenDigest is a member's digest and this agent's when they were last
// compared.
type seenDigest struct{ theirs, ours string }

// digestConflict is one member's disagreement with this agent.
type digestConflict struct {
	settings bool // the settings differ: its election messages are dropped
	// bootstrap: this agent is at its bootstrap configuration and the
	// member showed another list or a formed cluster; the protocol is not
	// told the member is down while it stays so (memberDown).
	bootstrap bool
	line      string // "" when there is nothing to report
}

// digestSettings is the SETTINGS part for this agent's configuration.
func (a *Agent) digestSettings() string {
	e := a.cfg.Election
	switch e.Protocol {
	case config.ProtocolMajority:
		return fmt.Sprintf("majority et=%v", e.ElectionTimeout.Std())
	case config.ProtocolRing:
		return "ring alg=" + e.RingAlgorithm
	default:
		return e.Protocol
	}
}

// makeDigest builds the digest of settings and configuration c.
func makeDigest(settings string, c protocols.Configuration) string {
	if c.IsZero() {
		return settings
	}
	vs := c.Voters
	if len(vs) > maxDigestVoters {
		h := fnv.New64a()
		_, _ = h.Write([]byte(vs))
		vs = fmt.Sprintf("#%016x", h.Sum64())
	}
	return fmt.Sprintf("%s|%d.%d|%s", settings, c.Term, c.Index, vs)
}

// splitDigest returns a digest's parts; version and voters are "" when it
// carries no configuration.
func splitDigest(d string) (settings, version, voters string) {
	settings, rest, _ := strings.Cut(d, "|")
	version, voters, _ = strings.Cut(rest, "|")
	return settings, version, voters
}

// showVoters prints a digest's voter list for people.
func showVoters(v string) string {
	if strings.HasPrefix(v, "#") {
		return "a list too long to publish (hash " + v[1:] + ")"
	}
	return "[" + strings.ReplaceAll(v, ",", " ") + "]"
}

// checkDigest publishes this agent's digest when it changed and compares
// every live member's with it. Runs on the loop after every input; the
// work is a string comparison per member unless something changed.
func (a *Agent) checkDigest() {
	t := &a.voters
	conf := protocols.Configuration{}
	if _, ok := a.proto.(protocols.VoterChanger); ok {
		conf = a.proto.Status(a.now()).Config
	}
	if t.digest == "" || conf != t.digestConf {
		t.digestConf = conf
		t.digest = makeDigest(a.digestSettings(), conf)
		if conf.Index > 0 && len(t.heldDown) > 0 {
			a.releaseHeldDown(a.now())
		}
		if dg, ok := a.cluster.(membership.Digester); ok {
			if err := dg.SetDigest(t.digest); err != nil {
				a.log.Warn("cannot publish the settings digest", zap.Error(err))
			}
		}
	}
	if t.seen == nil {
		t.seen = make(map[string]seenDigest)
		t.conflicts = make(map[string]digestConflict)
	}
	for name, m := range a.members {
		live := m.State == membership.StateAlive || m.State == membership.StateSuspect
		if !live || m.Digest == "" {
			if _, ok := t.seen[name]; ok {
				delete(t.seen, name)
				delete(t.conflicts, name)
			}
			continue
		}
		if seen, ok := t.seen[name]; !ok || seen.theirs != m.Digest || seen.ours != t.digest {
			t.seen[name] = seenDigest{theirs: m.Digest, ours: t.digest}
			a.compareDigest(name, m.Digest)
		}
	}
	for name := range t.seen {
		if _, ok := a.members[name]; !ok {
			delete(t.seen, name)
			delete(t.conflicts, name)
		}
	}
}

// compareDigest records (and logs, once per change) how member name's
// digest disagrees with this agent's, or forgets a disagreement that
// ended.
func (a *Agent) compareDigest(name, theirs string) {
	t := &a.voters
	ourSet, ourVer, ourVoters := splitDigest(t.digest)
	set, ver, voters := splitDigest(theirs)
	var c digestConflict
	switch {
	case set != ourSet:
		c = digestConflict{settings: true, line: fmt.Sprintf("%s runs with other settings (%q; this agent %q): its election messages are ignored until they agree", name, set, ourSet)}
		a.log.Warn("a member runs with settings that must be the same on every agent; ignoring its election messages",
			zap.String("member", name), zap.String("theirs", set), zap.String("ours", ourSet))
		if prev := t.conflicts[name]; !prev.settings {
			// Out of the election altogether, not only unheard: the
			// bootstrap would otherwise wait for its answer for ever.
			if m, ok := a.members[name]; ok && a.byID[m.ID] == name {
				a.proto.MemberDown(a.now(), m.ID)
			}
		}
	case ver != "" && ver == ourVer && voters != ourVoters && versionIndex(ver) == 0:
		c = digestConflict{bootstrap: true, line: fmt.Sprintf("%s bootstraps with voters %s, this agent with %s: fix the config files' election.voters so they agree; until one of them joins a formed cluster neither elects without the other", name, showVoters(voters), showVoters(ourVoters))}
		a.log.Warn("a member bootstraps with another voter list; neither elects without the other until the lists agree",
			zap.String("member", name), zap.String("theirs", showVoters(voters)), zap.String("ours", showVoters(ourVoters)))
	case ver != "" && versionIndex(ourVer) == 0 && versionIndex(ver) > 0:
		// A formed cluster exists: this agent must join it, never form
		// another, even once that member is gone.
		c = digestConflict{bootstrap: true}
		if !digestHas(voters, a.self.Name) {
			c.line = fmt.Sprintf("%s belongs to a formed cluster whose voters %s leave this agent out (its bootstrap list is %s): it waits and will not form another; on that cluster's leader, 'agent voters add %s' makes it a voter", name, showVoters(voters), showVoters(ourVoters), a.self.Name)
			a.log.Warn("a member belongs to a formed cluster that leaves this agent out; waiting to be added, not forming another",
				zap.String("member", name), zap.String("version", ver), zap.String("theirs", showVoters(voters)), zap.String("ours", showVoters(ourVoters)))
		}
	case ver != "" && versionIndex(ver) == 0 && versionIndex(ourVer) > 0 && voters != ourVoters && !digestHas(ourVoters, name):
		c = digestConflict{line: fmt.Sprintf("%s has not joined this cluster: it holds the bootstrap list %s, not a voter of %s; add it with 'agent voters add %s' if it should vote, or fix its election.voters", name, showVoters(voters), showVoters(ourVoters), name)}
	case ver != "" && ver == ourVer && voters != ourVoters:
		c = digestConflict{line: fmt.Sprintf("%s holds voters %s at configuration %s, this agent %s: neither counts the other's vote until one of them adopts a newer configuration", name, showVoters(voters), ver, showVoters(ourVoters))}
		a.log.Warn("a member holds another voter list at the same configuration version; votes between the two are refused",
			zap.String("member", name), zap.String("version", ver), zap.String("theirs", showVoters(voters)), zap.String("ours", showVoters(ourVoters)))
	default:
		if prev, was := t.conflicts[name]; was {
			if prev.line != "" {
				a.log.Info("a member agrees again", zap.String("member", name), zap.String("digest", theirs))
			}
			delete(t.conflicts, name)
			if m, ok := a.members[name]; ok && prev.settings && a.byID[m.ID] == name &&
				(m.State == membership.StateAlive || m.State == membership.StateSuspect) {
				a.proto.MemberUp(a.now(), m.ProtocolMember())
			}
		}
		return
	}
	t.conflicts[name] = c
}

// versionIndex is the index of a digest's TERM.INDEX.
func versionIndex(ver string) uint64 {
	_, idx, _ := strings.Cut(ver, ".")
	n, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// digestHas reports whether a digest's voter list names name (false for a
// hashed list: unknown).
func digestHas(voters, name string) bool {
	for v := range strings.SplitSeq(voters, ",") {
		if v == name {
			return true
		}
	}
	return false
}

// memberDown tells the protocol that member id (name) is dead or gone,
// except while this agent is at its bootstrap configuration and that
// member showed another bootstrap list or a formed cluster: the protocol's
// bootstrap lets a candidate win once every member gossip still reports
// alive answered, so a member that disagreed would, once down, let this
// agent form a second cluster with its own list (issue 14: n1 with ["n1"]
// partitioned from n2 and n3). Held back, it keeps the bootstrap waiting;
// the protocol hears of it when this agent adopts a formed configuration
// (releaseHeldDown). Runs on the loop.
func (a *Agent) memberDown(now protocols.Time, id protocols.ID, name string) {
	if c, ok := a.voters.conflicts[name]; ok && c.bootstrap && versionIndex(splitVersion(a.voters.digest)) == 0 {
		if a.voters.heldDown == nil {
			a.voters.heldDown = make(map[protocols.ID]string)
		}
		if _, held := a.voters.heldDown[id]; !held {
			a.log.Info("not counting a member out of the bootstrap: it disagreed on the voters", zap.String("member", name))
		}
		a.voters.heldDown[id] = name
		return
	}
	a.proto.MemberDown(now, id)
}

// releaseHeldDown tells the protocol of the members memberDown held back,
// once this agent has left its bootstrap configuration, for those still
// down.
func (a *Agent) releaseHeldDown(now protocols.Time) {
	for id, name := range a.voters.heldDown {
		delete(a.voters.heldDown, id)
		m, ok := a.members[name]
		if !ok || m.ID != id || a.byID[id] != name || m.State == membership.StateDead || m.State == membership.StateLeft {
			a.proto.MemberDown(now, id)
		}
	}
}

func splitVersion(d string) string {
	_, v, _ := splitDigest(d)
	return v
}

// settingsConflict reports whether the member with id runs with settings
// that disagree with this agent's: its election messages are dropped, so
// neither votes for nor counts the other. Runs on the loop.
func (a *Agent) settingsConflict(id protocols.ID) bool {
	if len(a.voters.conflicts) == 0 {
		return false
	}
	return a.voters.conflicts[a.byID[id]].settings
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
	conf protocols.Configuration
	// removed holds the members that get heartbeats although not voters:
	// removed ones for a grace, and ones being added; name → until when.
	removed map[string]protocols.Time

	// The settings digest: this agent's, the configuration it was made
	// from, each member's last compared (with ours) and the current
	// disagreements by member name.
	digest     string
	digestConf protocols.Configuration
	seen       map[string]seenDigest
	conflicts  map[string]digestConflict
	// heldDown are the members memberDown did not report down yet.
	heldDown map[protocols.ID]string
}

// heartbeat lets name have the leader's messages over the transport until
// until, voter or not.
func (t *voterTrack) heartbeat(name string, until protocols.Time) {
	if t.removed == nil {
		t.removed = make(map[string]protocols.Time)
	}
	t.removed[name] = until
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
	// A member being added, or one removed within removedGrace.
	until, ok := t.removed[name]
	if ok && now >= until {
		delete(t.removed, name)
		return false
	}
	return ok
}
