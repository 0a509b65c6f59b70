package multihost

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The idle probe cost in docs/multihost.md ("Half-open links") comes from
//
//	CONCLAVE_MULTIHOST_MEASURE=1 CONCLAVE_MULTIHOST_BASELINE=/path/to/old/agent \
//	  go test -count=1 -v -timeout 30m -run TestMeasureIdleProbeCost ./test/multihost
//
// Three idle hosts, bully and majority, run by the baseline build and by
// this one in turn, twice round, in one run; each agent's CPU is read
// from /proc over CONCLAVE_MULTIHOST_WINDOW (default 30 s). Without both
// variables the test skips: it takes minutes, and its figures are not
// asserted.
func TestMeasureIdleProbeCost(t *testing.T) {
	baseline := os.Getenv("CONCLAVE_MULTIHOST_BASELINE")
	if os.Getenv("CONCLAVE_MULTIHOST_MEASURE") == "" || baseline == "" {
		t.Skip("set CONCLAVE_MULTIHOST_MEASURE=1 and CONCLAVE_MULTIHOST_BASELINE=/path/to/agent to measure (minutes)")
	}
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("CONCLAVE_MULTIHOST_WINDOW")); err == nil && d > 0 {
		window = d
	}
	type key struct{ build, proto string }
	leader := map[key][]float64{}
	follower := map[key][]float64{}
	loadBefore := loadavg()
	for range 2 {
		for _, build := range []string{"baseline", "this"} {
			for _, proto := range []string{"bully", "majority"} {
				c := newCluster(t, 3, proto)
				if build == "baseline" {
					c.bin = baseline
				}
				c.startAll()
				c.waitAgreement(0)
				// Start-up work (joins, first detector samples) settles first.
				time.Sleep(5 * time.Second)
				lead, _ := c.waitAgreement(0)
				shares := cpuShares(t, c.hosts, window)
				if l, _, why := agreement(c.hosts, 0); why != "" || l != lead {
					t.Fatalf("%s %s: leadership moved during the window (%s, %s): the figures would not be idle ones", build, proto, l, why)
				}
				k := key{build, proto}
				for i, h := range c.hosts {
					share := shares[i]
					if h.name == lead {
						leader[k] = append(leader[k], share)
					} else {
						follower[k] = append(follower[k], share)
					}
				}
				c.close()
			}
		}
	}
	var b strings.Builder
	b.WriteString("| protocol | build | leader CPU, mean (each) | follower CPU, mean (each) |\n|---|---|---|---|\n")
	for _, proto := range []string{"bully", "majority"} {
		for _, build := range []string{"baseline", "this"} {
			k := key{build, proto}
			fmt.Fprintf(&b, "| %s | %s | %.2f%% %v | %.2f%% %v |\n", proto, build, 100*meanOf(leader[k]), pct(leader[k]), 100*meanOf(follower[k]), pct(follower[k]))
		}
	}
	fmt.Fprintf(&b, "\nwindow %v per cluster; load average (1, 5, 15 min) before: %s; after: %s\n", window, loadBefore, loadavg())
	t.Logf("\n%s", b.String())
}

func meanOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// pct formats shares of one core as percentages.
func pct(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.2f", 100*x))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
