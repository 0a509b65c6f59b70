package agent

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/internal/ratelog"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/transport"
)

// metricsCollector exports the agent's state as Prometheus metrics. It
// reads everything on the loop at scrape time, so the loop keeps plain
// counters and pays nothing for metrics between scrapes. Each agent has its
// own registry: `agent dev` runs several in one process.
type metricsCollector struct{ a *Agent }

var (
	descRole          = prometheus.NewDesc("conclave_role", "1 for this agent's current role, by role.", []string{"election", "role"}, nil)
	descEpoch         = prometheus.NewDesc("conclave_epoch", "The current epoch (fencing token).", []string{"election"}, nil)
	descIsLeader      = prometheus.NewDesc("conclave_is_leader", "1 while this agent leads (with a valid lease in majority).", []string{"election"}, nil)
	descHasLeader     = prometheus.NewDesc("conclave_has_leader", "1 while this agent knows a leader (itself or another).", []string{"election"}, nil)
	descLeaderChanges = prometheus.NewDesc("conclave_leader_changes_seen_total", "Leadership changes this agent observed.", []string{"election"}, nil)
	// The name before etcd's was adopted; it goes in the release after
	// the one that deprecated it (CHANGELOG.md).
	descLeaderChangesOld = prometheus.NewDesc("conclave_leader_changes_total", "Deprecated: use conclave_leader_changes_seen_total (same value); this name goes in the next release.", []string{"election"}, nil)
	descElectionsStarted = prometheus.NewDesc("conclave_elections_started_total", "Elections this agent took part in as a candidate.", []string{"election"}, nil)
	descElectionsWon     = prometheus.NewDesc("conclave_elections_won_total", "Elections this agent won.", []string{"election"}, nil)
	descSent             = prometheus.NewDesc("conclave_messages_sent_total", "Election messages handed to the transport, by kind.", []string{"election", "kind"}, nil)
	descReceived         = prometheus.NewDesc("conclave_messages_received_total", "Election messages received from members, by kind.", []string{"election", "kind"}, nil)
	descRefused          = prometheus.NewDesc("conclave_messages_refused_total", "Messages the protocol refused or that came from unknown nodes.", []string{"election"}, nil)
	descBeyondCeiling    = prometheus.NewDesc("conclave_messages_beyond_ceiling_total", "Messages refused because their term or epoch is beyond the ceiling (a buggy or hostile member); also counted in conclave_messages_refused_total.", []string{"election"}, nil)
	descDropped          = prometheus.NewDesc("conclave_transport_dropped_total", "Messages or frames the transport dropped, by reason.", []string{"reason"}, nil)
	descLeaderless       = prometheus.NewDesc("conclave_leaderless_seconds", "How long this agent's view went without a leader each time it lost one, until it knew the next: failover as this agent saw it.", []string{"election"}, nil)
	descLeaderPhi        = prometheus.NewDesc("conclave_leader_phi", "Phi of the current leader as seen by this agent (0 on the leader).", []string{"election"}, nil)
	descQuorumVoters     = prometheus.NewDesc("conclave_quorum_voters", "Configured voters (majority) or live members.", []string{"election"}, nil)
	descQuorumReachable  = prometheus.NewDesc("conclave_quorum_reachable", "Voters this agent hears, itself included.", []string{"election"}, nil)
	descQuorumHealthy    = prometheus.NewDesc("conclave_quorum_healthy", "1 while a majority of voters is reachable.", []string{"election"}, nil)
	descMembers          = prometheus.NewDesc("conclave_members", "Live members known, this agent included.", nil, nil)
	descAPIRefused       = prometheus.NewDesc("conclave_localapi_refused_total", "Socket connections and watch streams refused beyond api.max_connections and api.max_watchers, by what.", []string{"what"}, nil)
	descAPIOpen          = prometheus.NewDesc("conclave_localapi_open", "Socket connections and watch streams open now, by what.", []string{"what"}, nil)
	descHandshakeFailed  = prometheus.NewDesc("conclave_transport_handshake_failures_total", "Inbound libp2p connections that failed the handshake (wrong cluster key, not a conclave node), in this process; logged at most once per 10 s.", nil, nil)
	descGossipProblems   = prometheus.NewDesc("conclave_gossip_problems_total", "Warnings and errors memberlist reported (bad packets, unexpected nodes, …), in this process; logged at most once per 10 s per kind.", nil, nil)
	descRequests         = prometheus.NewDesc("conclave_localapi_requests_total", "Socket API requests answered, by path and status code.", []string{"path", "code"}, nil)
	descKeyRefused       = prometheus.NewDesc("conclave_key_refused_members", "Members that proved none of this agent's installed cluster keys within the last minute (each named in problems).", nil, nil)
	descAdmitFailed      = prometheus.NewDesc("conclave_transport_admission_failures_total", "libp2p connections that failed the admission handshake (no installed key in common), in this process.", nil, nil)
	descWrites           = prometheus.NewDesc("conclave_localapi_writes_total", "Socket API writes (resign, maint, voter changes) by path and outcome: ok, failed, or denied for want of permission; each is also an audit log line.", []string{"path", "outcome"}, nil)
)

func (c metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descEpoch, descIsLeader, descHasLeader, descLeaderChanges, descLeaderChangesOld, descElectionsStarted,
		descElectionsWon, descSent, descReceived, descRefused, descBeyondCeiling, descDropped, descLeaderless, descLeaderPhi, descQuorumVoters,
		descQuorumReachable, descQuorumHealthy, descMembers, descRequests, descAPIRefused, descAPIOpen, descHandshakeFailed, descGossipProblems, descWrites, descKeyRefused, descAdmitFailed} {
		ch <- d
	}
}

type metricsSnapshot struct {
	election  string
	status    api.Status
	stats     core.Stats
	leaderPhi float64
}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	var snaps []metricsSnapshot
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := a.do(ctx, func() {
		now := a.now()
		for _, e := range a.elections {
			snaps = append(snaps, metricsSnapshot{election: e.name, status: e.core.Status(now), stats: e.core.Stats(), leaderPhi: e.core.LeaderPhi(now)})
		}
	})
	if err != nil {
		return // the loop has stopped: no election metrics to give
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, snap := range snaps {
		collectElection(ch, snap)
	}
	gauge(descMembers, float64(snaps[0].status.Members))
	for reason, n := range a.tr.Stats().Dropped {
		counter(descDropped, float64(n), reason)
	}
	counter(descHandshakeFailed, float64(transport.HandshakeFailures()))
	counter(descGossipProblems, float64(membership.ProblemLines()))
	counter(descAdmitFailed, float64(transport.AdmissionFailures()))
	gauge(descKeyRefused, float64(len(a.keyRefused())))
	if a.srv != nil {
		for _, rc := range a.srv.RequestCounts() {
			counter(descRequests, float64(rc.Count), rc.Path, strconv.Itoa(rc.Code))
		}
		for _, wc := range a.srv.WriteCounts() {
			counter(descWrites, float64(wc.Count), wc.Path, wc.Outcome)
		}
		l := a.srv.Limits()
		counter(descAPIRefused, float64(l.RefusedConnections), "connections")
		counter(descAPIRefused, float64(l.RefusedWatchers), "watchers")
		gauge(descAPIOpen, float64(l.Connections), "connections")
		gauge(descAPIOpen, float64(l.Watchers), "watchers")
	}
}

// collectElection sends one election's metrics, labelled with its name.
func collectElection(ch chan<- prometheus.Metric, snap metricsSnapshot) {
	el := snap.election
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{el}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{el}, labels...)...)
	}
	for _, r := range []protocols.Role{protocols.Follower, protocols.Candidate, protocols.Leader, protocols.Observer} {
		gauge(descRole, b2f(snap.status.Role == r.String()), r.String())
	}
	gauge(descEpoch, float64(snap.status.Epoch))
	gauge(descIsLeader, b2f(snap.status.Role == api.RoleLeader))
	gauge(descHasLeader, b2f(snap.status.Leader != ""))
	counter(descLeaderChanges, float64(snap.stats.LeaderChanges))
	counter(descLeaderChangesOld, float64(snap.stats.LeaderChanges))
	counter(descElectionsStarted, float64(snap.stats.ElectionsStarted))
	counter(descElectionsWon, float64(snap.stats.ElectionsWon))
	for _, k := range protocols.AllKinds() {
		counter(descSent, float64(snap.stats.Sent[k]), k.String())
		counter(descReceived, float64(snap.stats.Received[k]), k.String())
	}
	counter(descRefused, float64(snap.stats.StepErrors))
	counter(descBeyondCeiling, float64(snap.stats.BeyondCeiling))
	buckets := make(map[float64]uint64, len(core.LeaderlessBuckets))
	var cum uint64
	for i, le := range core.LeaderlessBuckets {
		cum += snap.stats.Leaderless[i]
		buckets[le.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(descLeaderless, snap.stats.LeaderlessCount, snap.stats.LeaderlessSum.Seconds(), buckets, el)
	gauge(descLeaderPhi, min(snap.leaderPhi, api.MaxPhi))
	gauge(descQuorumVoters, float64(snap.status.Quorum.Voters))
	gauge(descQuorumReachable, float64(snap.status.Quorum.Reachable))
	gauge(descQuorumHealthy, b2f(snap.status.Quorum.Healthy))
}

// warnBeyondCeiling warns, at most once a minute, of a message refused for
// a term or epoch beyond protocols.Ceiling (the core counts them): any
// member can send such messages without end.
func (a *Agent) warnBeyondCeiling(m protocols.Message, err error) {
	if a.ceilingLog == nil {
		a.ceilingLog = ratelog.New(time.Minute)
	}
	if ok, suppressed := a.ceilingLog.Allow(time.Now()); ok {
		a.log.Warn("dropped a message whose term or epoch is beyond the ceiling: its sender runs a buggy build or holds a bad state record",
			zap.Stringer("msg", m), zap.Error(err), zap.Uint64("suppressed_since_last", suppressed))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
