package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/tune"
)

func runTune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tune", stderr)
	cf := addClientFlags(fs)
	cfgPath := fs.String("config", "", "the agent's configuration file, for the timings in force (default: the shipped defaults)")
	target := fs.Float64("target", 1, "false alarms a day per member to stay within")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			fmt.Fprintf(stderr, "agent tune: %v\n", err)
			return 1
		}
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	ms, err := c.Members(ctx)
	if err != nil {
		return fail(stderr, "tune", cf.socket, err)
	}
	var gaps []tune.Gaps
	for _, m := range ms {
		if m.Heartbeats != nil {
			gaps = append(gaps, tune.Gaps{Member: m.Name, Stats: *m.Heartbeats})
		}
	}
	cur := tune.Settings{
		Protocol:          cfg.Election.Protocol,
		HeartbeatInterval: cfg.Detector.HeartbeatInterval.Std(),
		ElectionTimeout:   cfg.Election.ElectionTimeout.Std(),
		Threshold:         cfg.Detector.Threshold,
		MinStdDev:         cfg.Detector.MinStdDev.Std(),
		AcceptablePause:   cfg.Detector.AcceptablePause.Std(),
	}
	rep, err := tune.Recommend(cur, gaps, *target)
	if err != nil {
		fmt.Fprintf(stderr, "agent tune: %v\n", err)
		return 1
	}
	if cf.json {
		printJSON(stdout, rep)
		return 0
	}
	w := rep.Worst.Stats
	fmt.Fprintf(stdout, "measured: %s's heartbeat gaps, %d samples: p50 %s, p99 %s, p99.9 %s, longest %s\n\n",
		rep.Worst.Member, w.Samples, fmtMs(w.P50Ms), fmtMs(w.P99Ms), fmtMs(w.P999Ms), fmtMs(w.MaxGapMs))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tIN FORCE\tRECOMMENDED")
	row := func(name string, f func(tune.Verdict) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(rep.Current), f(rep.Recommended))
	}
	row("detector.heartbeat_interval", func(v tune.Verdict) string { return v.Settings.HeartbeatInterval.String() })
	row("detector.threshold", func(v tune.Verdict) string { return fmt.Sprint(v.Settings.Threshold) })
	row("detector.acceptable_pause", func(v tune.Verdict) string { return v.Settings.AcceptablePause.String() })
	row("election.election_timeout", func(v tune.Verdict) string { return v.Settings.ElectionTimeout.String() })
	row("suspected after", func(v tune.Verdict) string { return v.SuspectAfter.Round(time.Millisecond).String() })
	row("false alarms/day, phi model", func(v tune.Verdict) string { return fmt.Sprintf("%.3g", v.PhiFalsePerDay) })
	row("false alarms/day, measured tail", func(v tune.Verdict) string { return fmt.Sprintf("%.3g", v.TailFalsePerDay) })
	row("needless elections/day", func(v tune.Verdict) string { return fmt.Sprintf("%.3g", v.ElectionFalsePerDay) })
	row("failover (worst case)", func(v tune.Verdict) string { return v.Failover.Round(time.Millisecond).String() })
	_ = tw.Flush()
	fmt.Fprintf(stdout, "\n%s.\n", rep.Why)
	return 0
}
