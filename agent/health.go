package agent

// Health-gated leadership (docs/health.md): the I/O side of
// health — the check runner and hooks (goroutines of the health package),
// the maintenance record in the data directory — feeding core.Node.SetHealth.
// The decisions (an ineligible node does not campaign, a leader hands
// over, a preferred node takes over) are the protocol's, and what the
// status says of them is the core's.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/health"
	"github.com/conclave-agent/conclave/localapi"
)

// healthGlue is the agent's health state. The runner and hooks run in
// goroutines of their own; everything else is loop-owned.
type healthGlue struct {
	runner *health.Runner
	// hooks run each election's [[hook]]s (by election name; none for an
	// election without hooks).
	hooks map[string]*health.Hooks
	// maint is the maintenance record in force, nil when none.
	maint *health.Maint
}

// healthSpecs turns the configuration's checks and hooks into the health
// package's: the checks in configuration order, the hooks by the election
// they run for.
func healthSpecs(cfg config.Config) ([]health.CheckSpec, map[string][]health.HookSpec) {
	checks := make([]health.CheckSpec, 0, len(cfg.Checks))
	for _, c := range cfg.Checks {
		checks = append(checks, health.CheckSpec{Name: c.Name, Command: c.Command, HTTP: c.HTTP,
			Interval: c.Interval.Std(), Timeout: c.Timeout.Std(), Fall: c.Fall, Rise: c.Rise})
	}
	hooks := make(map[string][]health.HookSpec)
	for _, h := range cfg.Hooks {
		name := h.Election
		if name == "" {
			name = config.DefaultElection
		}
		hooks[name] = append(hooks[name], health.HookSpec{On: h.On, Command: h.Command, Timeout: h.Timeout.Std()})
	}
	return checks, hooks
}

// maintenanceOnDisk reports whether the data directory holds a
// maintenance record, agent-wide or for the election called name, or one
// that cannot be read (the core treats both as maintenance: an operator
// asked for it).
func maintenanceOnDisk(cfg config.Config, name string) bool {
	_, on, err := health.ReadMaint(cfg.Node.DataDir)
	if on || err != nil {
		return true
	}
	if name == config.DefaultElection {
		return false
	}
	_, on, err = health.ReadMaint(electionDir(cfg.Node.DataDir, name))
	return on || err != nil
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
	g := &healthGlue{runner: runner, hooks: make(map[string]*health.Hooks)}
	for name, specs := range hooks {
		g.hooks[name] = health.NewHooks(name, specs, a.log.Named("hook").With(zap.String("election", name)))
	}
	m, on, err := health.ReadMaint(a.cfg.Node.DataDir)
	switch {
	case err != nil:
		a.log.Error("cannot read the maintenance record; staying in maintenance until it is fixed or cleared with agent maint off", zap.Error(err))
		g.maint = &health.Maint{Reason: "unreadable maintenance record: " + err.Error()}
	case on:
		a.log.Info("in maintenance (from the data directory)", zap.String("reason", m.Reason), zap.Time("since", m.Since))
		g.maint = &m
	}
	for _, e := range a.elections[1:] {
		switch m, on, err := health.ReadMaint(electionDir(a.cfg.Node.DataDir, e.name)); {
		case err != nil:
			a.log.Error("cannot read an election's maintenance record; it stays in maintenance until the record is fixed or cleared with agent maint -election NAME off", zap.String("election", e.name), zap.Error(err))
			e.maint = &health.Maint{Reason: "unreadable maintenance record: " + err.Error()}
		case on:
			a.log.Info("election in maintenance (from the data directory)", zap.String("election", e.name), zap.String("reason", m.Reason), zap.Time("since", m.Since))
			e.maint = &m
		}
	}
	a.health = g
	runner.Start()
	a.applyHealth()
	return nil
}

// stopHealth stops the checks and the hooks.
func (a *Agent) stopHealth() {
	if a.health == nil {
		return
	}
	a.health.runner.Close()
	for _, h := range a.health.hooks {
		h.Close()
	}
}

// healthChanged fires when a check changed status (nil before start: a nil
// channel never fires).
func (a *Agent) healthChanged() <-chan struct{} {
	if a.health == nil {
		return nil
	}
	return a.health.runner.Changed()
}

// currentHealth is what the checks and maintenance say now of election e:
// the agent-wide maintenance and checks, and e's own maintenance; the
// core decides what it means for candidacy.
func (a *Agent) currentHealth(e *election) core.Health {
	g := a.health
	maint := g.maint
	if maint == nil {
		maint = e.maint
	}
	h := core.Health{Maintenance: maint != nil}
	rep := &api.HealthReport{Status: api.HealthPassing, Priority: a.cfg.PriorityFor(e.name)}
	for i, c := range g.runner.Snapshot() {
		// Snapshot is in configuration order: a check names the
		// election it gates, or none for every election.
		if k := a.cfg.Checks[i].Election; k != "" && k != e.name {
			continue
		}
		rep.Checks = append(rep.Checks, api.CheckState{Name: c.Name, Status: c.Status, Output: c.Output, LastRun: c.LastRun})
		if c.Status != health.StatusPassing {
			rep.Status = api.HealthFailing
			h.ChecksFailing = true
		}
	}
	if maint != nil {
		rep.Status = api.HealthMaintenance
		rep.Maintenance = &api.MaintInfo{Reason: maint.Reason, Since: maint.Since}
	}
	h.Report = rep
	return h
}

// applyHealth gives the core the current health. On the loop, after a
// check changed status and after maintenance changed.
func (a *Agent) applyHealth() {
	if a.health == nil {
		return
	}
	for _, e := range a.elections {
		e.core.SetHealth(a.now(), a.currentHealth(e))
	}
}

var _ localapi.MaintBackend = backend{}

// SetMaint implements localapi.MaintBackend: the record is written (or
// removed) durably first, outside the loop, and only then applied, so an
// answer of "on" survives a crash.
func (b backend) SetMaint(ctx context.Context, on bool, reason string) (api.MaintResult, error) {
	a := b.a
	e, err := a.electionOf(ctx)
	if err != nil {
		return api.MaintResult{}, err
	}
	if err := health.CheckReason(reason); err != nil {
		return api.MaintResult{}, fmt.Errorf("%w: %w", localapi.ErrBadMaint, err)
	}
	// The default election's record is the agent-wide one, where
	// releases before named elections kept it: every election honours
	// it. A named election's is its own.
	dir := electionDir(a.cfg.Node.DataDir, e.name)
	var m *health.Maint
	if on {
		m = &health.Maint{Reason: reason, Since: time.Now().UTC().Truncate(time.Second)}
		if err := health.WriteMaint(dir, *m); err != nil {
			return api.MaintResult{}, err
		}
	} else if err := health.ClearMaint(dir); err != nil {
		return api.MaintResult{}, err
	}
	err = a.do(ctx, func() {
		if a.health == nil {
			return
		}
		if e == a.def() {
			a.health.maint = m
		} else {
			e.maint = m
		}
		a.log.Info("maintenance", zap.String("election", e.name), zap.Bool("on", on), zap.String("reason", reason))
		a.applyHealth()
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
