package multihost

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	baseline := measureBaseline(t)
	window := envDuration("CONCLAVE_MULTIHOST_WINDOW", 30*time.Second)
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

// The idle-member bound in docs/multihost.md ("Idle members") comes from
//
//	CONCLAVE_MULTIHOST_MEASURE=1 go test -count=1 -v -timeout 30m \
//	  -run TestMeasureIdleMemberBound ./test/multihost -args -idle-trials 6
//
// For each transport.idle_probe_interval (1 s, the default 5 s, 30 s), 3
// voters and an observer, n4, which sends the voters nothing and probes
// them at the slow speed: n4's CPU over an idle window, then trials in
// which a follower's link goes down at the bridge, or only its transport
// port is blocked (gossip still hears it), and n4 is timed until its
// status counts 2 of 3 voters reachable. (The followers are no
// witnesses: they talk to each other often enough to be probed at the
// fast speed.) Figures are logged, not asserted.
func TestMeasureIdleMemberBound(t *testing.T) {
	if os.Getenv("CONCLAVE_MULTIHOST_MEASURE") == "" {
		t.Skip("set CONCLAVE_MULTIHOST_MEASURE=1 to measure (minutes)")
	}
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("CONCLAVE_MULTIHOST_WINDOW")); err == nil && d > 0 {
		window = d
	}
	loadBefore := loadavg()
	var rows []string
	for _, interval := range []time.Duration{time.Second, 5 * time.Second, 30 * time.Second} {
		c := newCluster(t, 4, "majority")
		c.voters = []string{"n1", "n2", "n3"}
		c.transportKeys = fmt.Sprintf("idle_probe_interval = %q\n", interval)
		for _, h := range c.hosts {
			c.configure(h, h.id)
		}
		c.startAll()
		c.waitAgreement(0)
		time.Sleep(5 * time.Second)
		c.waitAgreement(0)
		observer := c.host("n4")
		share := cpuShares(t, []*host{observer}, window)[0]
		var took, tookTransport []time.Duration
		for trial := range 2 * *idleTrials {
			leader, _ := c.waitAgreement(0)
			var gone *host
			for _, h := range c.hosts[:3] {
				if h.name != leader && (gone == nil || trial%4 >= 2) {
					gone = h
				}
			}
			// Odd trials block only gone's transport port: gossip still
			// hears it, so the observer's slow probe is all that notices.
			transportOnly := trial%2 == 1
			waitFor(t, "n4 to reach all three voters", func() (bool, string) {
				st, err := observer.status()
				return err == nil && st.Quorum.Reachable == 3, fmt.Sprintf("quorum %+v, %v", st.Quorum, err)
			})
			cut := time.Now()
			if transportOnly {
				blockTransport(t, c, gone, "-A")
			} else if err := c.net.Unplug(context.Background(), gone.name); err != nil {
				t.Fatal(err)
			}
			for {
				if st, err := observer.status(); err == nil && st.Quorum.Reachable < 3 {
					break
				}
				if time.Since(cut) > 2*interval+waitLimit {
					t.Fatalf("interval %v, trial %d: %s cut off (transport only: %v); n4 still counts it reachable after %v", interval, trial+1, gone.name, transportOnly, time.Since(cut))
				}
				time.Sleep(5 * time.Millisecond)
			}
			d := time.Since(cut)
			if transportOnly {
				tookTransport = append(tookTransport, d)
			} else {
				took = append(took, d)
			}
			t.Logf("interval %v, trial %d: follower %s cut off (transport port only: %v); the observer counted it unreachable after %v", interval, trial+1, gone.name, transportOnly, d)
			if transportOnly {
				blockTransport(t, c, gone, "-D")
			} else if err := c.net.Plug(context.Background(), gone.name); err != nil {
				t.Fatal(err)
			}
			c.rejoin(gone, time.Now())
		}
		rows = append(rows, fmt.Sprintf("| %v | %.2f %% | %s | %s |", interval, 100*share, summary(took), summary(tookTransport)))
		c.close()
	}
	t.Logf("load %s before, %s after; the observer's CPU over %v", loadBefore, loadavg(), window)
	t.Log("| idle_probe_interval | observer's CPU | a follower's link down → the observer counts it unreachable | only its transport port blocked → the same |")
	for _, r := range rows {
		t.Log(r)
	}
}

// blockTransport adds (op "-A") or deletes ("-D") rules in h's namespace
// that drop every TCP segment of the transport, in and out, leaving gossip
// alone. (Dropping only what comes in left h's own probes reaching the
// others, which counted it heard.)
func blockTransport(t *testing.T, c *cluster, h *host, op string) {
	t.Helper()
	ns := c.net.Host(h.name).NS
	for _, rule := range [][]string{
		{"INPUT", "-p", "tcp", "--dport", fmt.Sprint(transportPort), "-j", "DROP"},
		{"INPUT", "-p", "tcp", "--sport", fmt.Sprint(transportPort), "-j", "DROP"},
		{"OUTPUT", "-p", "tcp", "--dport", fmt.Sprint(transportPort), "-j", "DROP"},
		{"OUTPUT", "-p", "tcp", "--sport", fmt.Sprint(transportPort), "-j", "DROP"},
	} {
		argv := append([]string{"ip", "netns", "exec", ns, "iptables", op}, rule...)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
}

// idleTrials is how many links TestMeasureIdleMemberBound takes down per
// setting.
var idleTrials = flag.Int("idle-trials", 5, "links TestMeasureIdleMemberBound takes down, and transport ports it blocks, per idle_probe_interval")
