package agent

// Health-gated leadership (issue 15, docs/health.md): the glue between the
// health package (checks, maintenance record, hooks) and the election. The
// decisions — an ineligible node does not campaign, a leader hands over —
// live in the protocol (protocols.Candidacy); this file only feeds it and
// reports. Its hooks into the rest of the agent are one line each:
//
//	newProtocol      majority.Config{…, Candidacy: initialCandidacy(cfg), PreemptDelay: …}
//	membership.Start membership.Config{…, UserMeta: userMeta(cfg)}
//	Run              a.startHealth(); defer a.stopHealth()
//	loop             case <-a.healthChanged(): a.applyHealth()
//	status           a.addHealth(&out, st)
//	publish          a.healthTransition(v)
//
// and backend gains SetMaint (localapi.MaintBackend) below.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/health"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
)

// healthGlue is the agent's health state. The runner and hooks run in
// goroutines of their own; everything else is loop-owned.
type healthGlue struct {
	runner *health.Runner
	hooks  *health.Hooks
	// maint is the maintenance record in force, nil when none.
	maint *health.Maint
	// cand is the candidacy last given to the protocol.
	cand protocols.Candidacy
	// lastHook is the transition the hooks last fired for, with its
	// leader and epoch, so a repeated view does not fire twice.
	lastHook health.Transition
	// metaRaw and meta cache the last leader meta decoded from gossip:
	// status is computed after every input.
	metaRaw string
	meta    api.Meta
}

// healthSpecs turns the configuration's checks and hooks into the health
// package's.
func healthSpecs(cfg config.Config) ([]health.CheckSpec, []health.HookSpec) {
	checks := make([]health.CheckSpec, 0, len(cfg.Checks))
	for _, c := range cfg.Checks {
		checks = append(checks, health.CheckSpec{Name: c.Name, Command: c.Command, HTTP: c.HTTP,
			Interval: c.Interval.Std(), Timeout: c.Timeout.Std(), Fall: c.Fall, Rise: c.Rise})
	}
	hooks := make([]health.HookSpec, 0, len(cfg.Hooks))
	for _, h := range cfg.Hooks {
		hooks = append(hooks, health.HookSpec{On: h.On, Command: h.Command, Timeout: h.Timeout.Std()})
	}
	return checks, hooks
}

// initialCandidacy is the candidacy an agent starts with: ineligible while
// in maintenance, and while it has checks that have not passed yet (it
// must not lead before its service is known healthy), or when the
// maintenance record cannot be read (an operator asked for maintenance;
// never lose that silently).
func initialCandidacy(cfg config.Config) protocols.Candidacy {
	c := protocols.Candidacy{Priority: uint8(cfg.Node.Priority)}
	_, on, err := health.ReadMaint(cfg.Node.DataDir)
	c.Ineligible = on || err != nil || len(cfg.Checks) > 0
	return c
}

// userMeta is node.meta as published in gossip ("" for none).
func userMeta(cfg config.Config) string {
	b, err := api.NewMeta(cfg.Node.Meta).MarshalJSON()
	if err != nil || string(b) == "null" {
		return ""
	}
	return string(b)
}

// startHealth starts the checks and the hooks; Run calls it before the
// loop.
func (a *Agent) startHealth() error {
	checks, hooks := healthSpecs(a.cfg)
	runner, err := health.NewRunner(checks)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	g := &healthGlue{runner: runner, hooks: health.NewHooks(hooks, a.log.Named("hook"))}
	m, on, err := health.ReadMaint(a.cfg.Node.DataDir)
	switch {
	case err != nil:
		a.log.Error("cannot read the maintenance record; staying in maintenance until it is fixed or cleared with agent maint off", zap.Error(err))
		g.maint = &health.Maint{Reason: "unreadable maintenance record: " + err.Error()}
	case on:
		a.log.Info("in maintenance (from the data directory)", zap.String("reason", m.Reason), zap.Time("since", m.Since))
		g.maint = &m
	}
	g.cand = initialCandidacy(a.cfg)
	a.health = g
	runner.Start()
	return nil
}

// stopHealth stops the checks and the hooks.
func (a *Agent) stopHealth() {
	if a.health == nil {
		return
	}
	a.health.runner.Close()
	a.health.hooks.Close()
}

// healthChanged fires when a check changed status (nil before start: a nil
// channel never fires).
func (a *Agent) healthChanged() <-chan struct{} {
	if a.health == nil {
		return nil
	}
	return a.health.runner.Changed()
}

// candidacy is what the checks and maintenance say now.
func (a *Agent) candidacy() protocols.Candidacy {
	g := a.health
	return protocols.Candidacy{
		Ineligible: g.maint != nil || !g.runner.Passing(),
		Priority:   uint8(a.cfg.Node.Priority),
	}
}

// applyHealth gives the protocol the current candidacy when it changed.
// On the loop.
func (a *Agent) applyHealth() {
	if a.health == nil {
		return
	}
	c := a.candidacy()
	if c == a.health.cand {
		return
	}
	a.health.cand = c
	a.log.Info("candidacy", zap.Bool("eligible", c.Eligible()), zap.Uint8("priority", c.Priority), zap.Bool("maintenance", a.health.maint != nil))
	if cs, ok := a.proto.(protocols.CandidacySetter); ok {
		cs.SetCandidacy(a.now(), c)
	}
}

// addHealth fills the status's health and leader_meta. On the loop.
func (a *Agent) addHealth(out *api.Status, st protocols.Status) {
	out.LeaderMeta = a.leaderMeta(out.Leader)
	g := a.health
	if g == nil {
		return
	}
	rep := &api.HealthReport{Status: api.HealthPassing, Priority: a.cfg.Node.Priority, NoHealthyCandidate: st.NoEligibleTarget}
	for _, c := range g.runner.Snapshot() {
		rep.Checks = append(rep.Checks, api.CheckState{Name: c.Name, Status: c.Status, Output: c.Output, LastRun: c.LastRun})
		if c.Status != health.StatusPassing {
			rep.Status = api.HealthFailing
		}
	}
	if g.maint != nil {
		rep.Status = api.HealthMaintenance
		rep.Maintenance = &api.MaintInfo{Reason: g.maint.Reason, Since: g.maint.Since}
	}
	out.Health = rep
}

// leaderMeta is the named leader's node.meta: this node's own, or what
// gossip says the leader publishes.
func (a *Agent) leaderMeta(leader string) api.Meta {
	switch {
	case leader == "":
		return api.Meta{}
	case leader == a.self.Name:
		return api.NewMeta(a.cfg.Node.Meta)
	}
	mb, ok := a.members[leader]
	if !ok || mb.UserMeta == "" {
		return api.Meta{}
	}
	g := a.health
	if g != nil && g.metaRaw == mb.UserMeta {
		return g.meta
	}
	var m api.Meta
	if err := m.UnmarshalJSON([]byte(mb.UserMeta)); err != nil {
		return api.Meta{}
	}
	if g != nil {
		g.metaRaw, g.meta = mb.UserMeta, m
	}
	return m
}

// healthTransition fires the hooks for a new view. On the loop; it never
// blocks (Hooks.Fire only queues).
func (a *Agent) healthTransition(v view) {
	if a.health == nil {
		return
	}
	t := health.Transition{Epoch: v.epoch, Leader: v.leader, Role: v.role.String()}
	switch {
	case v.role == protocols.Leader:
		t.On = health.OnLeader
	case v.leader != "":
		t.On = health.OnFollower
	default:
		t.On = health.OnNoLeader
	}
	if t == a.health.lastHook {
		return
	}
	a.health.lastHook = t
	a.health.hooks.Fire(t)
}

var _ localapi.MaintBackend = backend{}

// SetMaint implements localapi.MaintBackend: the record is written (or
// removed) durably first, outside the loop, and only then applied, so an
// answer of "on" survives a crash.
func (b backend) SetMaint(ctx context.Context, on bool, reason string) (api.MaintResult, error) {
	a := b.a
	if err := health.CheckReason(reason); err != nil {
		return api.MaintResult{}, fmt.Errorf("%w: %w", localapi.ErrBadMaint, err)
	}
	var m *health.Maint
	if on {
		m = &health.Maint{Reason: reason, Since: time.Now().UTC().Truncate(time.Second)}
		if err := health.WriteMaint(a.cfg.Node.DataDir, *m); err != nil {
			return api.MaintResult{}, err
		}
	} else if err := health.ClearMaint(a.cfg.Node.DataDir); err != nil {
		return api.MaintResult{}, err
	}
	err := a.do(ctx, func() {
		if a.health == nil {
			return
		}
		a.health.maint = m
		a.applyHealth()
		a.log.Info("maintenance", zap.Bool("on", on), zap.String("reason", reason))
	})
	if err != nil && !errors.Is(err, errStopped) {
		return api.MaintResult{}, err
	}
	res := api.MaintResult{Maintenance: on}
	if m != nil {
		res.Info = &api.MaintInfo{Reason: m.Reason, Since: m.Since}
	}
	return res, nil
}
