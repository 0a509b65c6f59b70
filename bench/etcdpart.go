package main

import (
	"context"
	"path/filepath"
	"time"
)

// runEtcd measures etcd's election recipe at the tuned and default
// session TTLs (etcd.go does the work).
func runEtcd(ctx context.Context, o *options) ([]etcdResult, error) {
	var out []etcdResult
	for _, series := range []struct {
		label  string
		ttl    time.Duration
		trials int
	}{
		{"etcd election, session TTL 2 s (smallest accepted)", 2 * time.Second, o.etcdTrials},
		{"etcd election, default session TTL (60 s)", 0, o.etcdDefault},
	} {
		if series.trials == 0 {
			continue
		}
		ds, err := measureEtcdFailover(ctx, etcdOptions{
			WorkDir: filepath.Join(o.work, "etcd"), TTL: series.ttl, Trials: series.trials, Campaigners: 3, Log: o.logf,
		})
		if err != nil {
			return out, err
		}
		s := summarize(ds)
		o.logf("%s: median %s p90 %s worst %s", series.label, ms(s.Median), ms(s.P90), ms(s.Max))
		out = append(out, etcdResult{Label: series.label, TTL: series.ttl, Samples: ds})
	}
	// etcd's own leader failover, for scale: the recipe above cannot be
	// faster than the session TTL, whatever raft does.
	if o.etcdTrials > 0 {
		ds, err := measureEtcdRaftFailover(ctx, etcdOptions{WorkDir: filepath.Join(o.work, "etcd"), Trials: o.etcdTrials, Log: o.logf})
		if err != nil {
			return out, err
		}
		s := summarize(ds)
		o.logf("etcd raft leader failover: median %s p90 %s worst %s", ms(s.Median), ms(s.P90), ms(s.Max))
		out = append(out, etcdResult{Label: "etcd raft leader (SIGKILL of the leading member)", Samples: ds, Raft: true})
	}
	return out, nil
}
