package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/health"
	"github.com/conclave-agent/conclave/protocols"
)

// healthCollector exports health-gated leadership (docs/health.md): the
// health state, each check's results, hand-overs by reason and the hooks'
// runs. Like metricsCollector it reads on the loop at scrape time.
type healthCollector struct{ a *Agent }

var (
	descHealth      = prometheus.NewDesc("conclave_health", "1 for this agent's current health, by status (passing, failing, maintenance).", []string{"status"}, nil)
	descEligible    = prometheus.NewDesc("conclave_eligible", "1 while this agent puts itself forward for leadership.", nil, nil)
	descCheckPass   = prometheus.NewDesc("conclave_check_passing", "1 while the check passes (after fall and rise), by check.", []string{"check"}, nil)
	descCheckRuns   = prometheus.NewDesc("conclave_check_runs_total", "Check runs, by check and result (pass, fail).", []string{"check", "result"}, nil)
	descTransfers   = prometheus.NewDesc("conclave_transfers_total", "Leadership hand-overs this agent started, by reason (resign, health, priority).", []string{"reason"}, nil)
	descHookRuns    = prometheus.NewDesc("conclave_hook_runs_total", "Hook commands run.", nil, nil)
	descHookFailed  = prometheus.NewDesc("conclave_hook_failures_total", "Hook commands that failed or timed out.", nil, nil)
	descHookDropped = prometheus.NewDesc("conclave_hook_dropped_total", "Transitions whose hooks were dropped because too many were waiting.", nil, nil)
)

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHealth, descEligible, descCheckPass, descCheckRuns, descTransfers, descHookRuns, descHookFailed, descHookDropped} {
		ch <- d
	}
}

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	var (
		rep       *api.HealthReport
		checks    []health.CheckState
		eligible  bool
		transfers protocols.TransferCounts
		hooks     health.HookStats
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := a.do(ctx, func() {
		if a.health == nil {
			return
		}
		rep = a.def().core.Status(a.now()).Health
		checks = a.health.runner.Snapshot()
		eligible = a.def().core.Candidacy().Eligible()
		for _, h := range a.health.hooks {
			st := h.Stats()
			hooks.Runs += st.Runs
			hooks.Failures += st.Failures
			hooks.Dropped += st.Dropped
		}
		transfers = a.def().core.Transfers()
	})
	if err != nil || rep == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, s := range []string{api.HealthPassing, api.HealthFailing, api.HealthMaintenance} {
		gauge(descHealth, b2f(rep.Status == s), s)
	}
	gauge(descEligible, b2f(eligible))
	for _, k := range checks {
		gauge(descCheckPass, b2f(k.Status == health.StatusPassing), k.Name)
		counter(descCheckRuns, float64(k.Passes), k.Name, "pass")
		counter(descCheckRuns, float64(k.Failures), k.Name, "fail")
	}
	counter(descTransfers, float64(transfers.Resign), "resign")
	counter(descTransfers, float64(transfers.Health), "health")
	counter(descTransfers, float64(transfers.Priority), "priority")
	counter(descHookRuns, float64(hooks.Runs))
	counter(descHookFailed, float64(hooks.Failures))
	counter(descHookDropped, float64(hooks.Dropped))
}
