// Command phieval evaluates the phi-accrual failure detector against fixed
// timeouts in simulated networks and writes the plot and tables behind
// docs/phi.md: detection time of a crashed sender against the rate of false
// suspicions of a live one, under (a) ordinary jitter, (b) rare long sender
// pauses and (c) step changes in latency.
//
// It is a tool, not part of the agent: it may use seeded randomness and
// write files, which package phi itself must never do. The same seed gives
// the same numbers.
//
//	go run ./cmd/phieval -days 7 -svg docs/phi-eval.svg > /tmp/tables.md
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/conclave-agent/conclave/phi"
)

func main() {
	var (
		days    = flag.Float64("days", 1, "simulated days per scenario")
		seed    = flag.Uint64("seed", 1, "random seed")
		svgPath = flag.String("svg", "", "write the plot to this file")
		sweep   = flag.Bool("sweep", false, "also sweep max_samples, min_std_dev and acceptable_pause")
	)
	flag.Parse()
	if err := run(os.Stdout, *days, *seed, *svgPath, *sweep); err != nil {
		fmt.Fprintln(os.Stderr, "phieval:", err)
		os.Exit(1)
	}
}

// Thresholds and timeouts on the curves.
var (
	thresholds = []float64{1, 2, 4, 8, 10, 12, 16}
	timeouts   = []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 1000 * time.Millisecond}
)

const (
	familyDefault = "phi, default parameters"
	familyBare    = "phi, no pause, min_std_dev 5ms"
	familyFixed   = "fixed timeout"
)

// candidates returns the detectors on the plot: phi with the default
// parameters, phi as in the paper (no acceptable pause, a small deviation
// floor), and fixed timeouts.
func candidates() []candidate {
	var cs []candidate
	for _, th := range thresholds {
		c := phi.DefaultConfig()
		c.Threshold = th
		cs = append(cs, phiCandidate(familyDefault, c))
	}
	for _, th := range thresholds {
		c := phi.DefaultConfig()
		c.Threshold, c.AcceptablePause, c.MinStdDev = th, 0, 5*time.Millisecond
		cs = append(cs, phiCandidate(familyBare, c))
	}
	for _, to := range timeouts {
		cs = append(cs, fixedCandidate(to))
	}
	return cs
}

// crashEvery spaces crash trials, in heartbeats: at the default 50 ms one
// trial every 5 s, 17,280 a day.
const crashEvery = 100

func run(out io.Writer, days float64, seed uint64, svgPath string, sweep bool) error {
	length := time.Duration(days * float64(24*time.Hour))
	interval := phi.DefaultHeartbeatInterval
	def := phi.DefaultConfig()
	fmt.Fprintf(out, "Heartbeat interval %v, %.3g simulated days per scenario (%d heartbeats), seed %d.\n",
		interval, days, int64(length/interval), seed)
	fmt.Fprintf(out, "Defaults: threshold %g, max_samples %d, min_std_dev %v, acceptable_pause %v.\n\n",
		def.Threshold, def.MaxSamples, def.MinStdDev, def.AcceptablePause)
	var panels []panel
	for i, sc := range scenarios {
		res := simulate(sc, candidates(), interval, length, crashEvery, seed+uint64(i))
		fmt.Fprintf(out, "### (%s) %s\n\n", sc.key, sc.name)
		fmt.Fprintln(out, "| detector | setting | mean detection | p99 detection | max detection | false suspicions | per day | suspicions in pauses / day |")
		fmt.Fprintln(out, "|---|---|---:|---:|---:|---:|---:|---:|")
		for _, r := range res {
			fmt.Fprintf(out, "| %s | %s | %d ms | %d ms | %d ms | %d | %.3g | %.3g |\n", r.cand.family, r.cand.label,
				r.meanDetection().Milliseconds(), r.quantile(0.99).Milliseconds(), r.quantile(1).Milliseconds(),
				r.falses, perDay(r.falses, length), perDay(r.pauseSusp, length))
		}
		fmt.Fprintln(out)
		panels = append(panels, newPanel(fmt.Sprintf("(%s) %s", sc.key, sc.name), res, length))
	}
	if sweep {
		runSweep(out, interval, length, seed)
	}
	if svgPath != "" {
		f, err := os.Create(svgPath)
		if err != nil {
			return fmt.Errorf("create plot: %w", err)
		}
		writeSVG(f, panels, fmt.Sprintf("Detection time vs false suspicions, heartbeat every %v, %.3g simulated days per scenario", interval, days))
		if err := f.Close(); err != nil {
			return fmt.Errorf("write plot %s: %w", svgPath, err)
		}
	}
	return nil
}

// runSweep varies one parameter at a time around the defaults, at a few
// thresholds, to show what each parameter buys.
func runSweep(out io.Writer, interval, length time.Duration, seed uint64) {
	type variant struct {
		name string
		set  func(*phi.Config)
	}
	var vs []variant
	for _, n := range []int{50, 200, 1000} {
		vs = append(vs, variant{fmt.Sprintf("max_samples %d", n), func(c *phi.Config) { c.MaxSamples = n }})
	}
	for _, s := range []time.Duration{5, 10, 25, 50} {
		s *= time.Millisecond
		vs = append(vs, variant{fmt.Sprintf("min_std_dev %v", s), func(c *phi.Config) { c.MinStdDev = s }})
	}
	for _, p := range []time.Duration{0, 100, 200, 400} {
		p *= time.Millisecond
		vs = append(vs, variant{fmt.Sprintf("acceptable_pause %v", p), func(c *phi.Config) { c.AcceptablePause = p }})
	}
	fmt.Fprintln(out, "### Parameter sweep (one parameter varied from the defaults)")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Mean detection / false suspicions per day in scenarios (a), (b), (c); for (b) also suspicions during pauses per day.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| variant | threshold | (a) | (b) | (c) |")
	fmt.Fprintln(out, "|---|---:|---|---|---|")
	var cands []candidate
	for _, v := range vs {
		for _, th := range []float64{8, 10, 12} {
			c := phi.DefaultConfig()
			c.Threshold = th
			v.set(&c)
			cand := phiCandidate(v.name, c)
			cands = append(cands, cand)
		}
	}
	var all [][]result
	for i, sc := range scenarios {
		all = append(all, simulate(sc, cands, interval, length, crashEvery, seed+uint64(i)))
	}
	for j, c := range cands {
		fmt.Fprintf(out, "| %s | %s |", c.family, c.label)
		for i := range scenarios {
			r := all[i][j]
			fmt.Fprintf(out, " %d ms / %.3g", r.meanDetection().Milliseconds(), perDay(r.falses, length))
			if scenarios[i].pauseRate > 0 {
				fmt.Fprintf(out, " (+%.3g)", perDay(r.pauseSusp, length))
			}
			fmt.Fprint(out, " |")
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
}
