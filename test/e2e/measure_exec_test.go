package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

var measureExec = flag.Int("measure.exec", 0, "run TestMeasureExec with this many trials per kind of change (not for CI)")

// termScript records, in $OUT/term, the wall-clock time at which the
// command got SIGTERM (date forks: this adds about a millisecond).
const termScript = `trap 'date +%s%N > "$OUT/term.tmp"; mv "$OUT/term.tmp" "$OUT/term"; exit 0' TERM
echo $$ > "$OUT/started.tmp"; mv "$OUT/started.tmp" "$OUT/started"
while :; do sleep 0.05; done`

// TestMeasureExec measures how long `agent exec` takes to SIGTERM its
// command after the agent's own status changes: a resign, a lease lost
// because the followers stopped answering (they are SIGSTOPped), and a
// SIGSTOP of the leading agent itself (then against the lease it had).
// The change's time is when a watcher of the agent's own socket reads it
// (for SIGSTOP: the signal). It asserts nothing about the figures. Run with
//
//	go test ./test/e2e/ -run TestMeasureExec -measure.exec 10 -v
func TestMeasureExec(t *testing.T) {
	if *measureExec <= 0 {
		t.Skip("runs only with -measure.exec N")
	}
	c := newCluster(t, 3, "majority")
	c.startAll()
	results := map[string][]time.Duration{}
	var leases []time.Duration
	for trial := range *measureExec {
		for _, kind := range []string{"resign", "lease-loss", "sigstop"} {
			a := c.waitAgreement(0)
			ld := c.byName(a.leader)
			out := filepath.Join(c.dir, fmt.Sprintf("exec-%s-%d", kind, trial))
			if err := os.Mkdir(out, 0o700); err != nil {
				t.Fatal(err)
			}
			ex := c.spawn(filepath.Base(out), []string{"OUT=" + out}, "exec", "-socket", ld.socket, "-grace", "5s", "--", "sh", "-c", termScript)
			waitFor(t, electWait, "the command to start", func() (bool, string) {
				_, err := os.Stat(filepath.Join(out, "started"))
				return err == nil, "not started"
			})
			// The agent's own announcement, read on its socket.
			ctx, cancel := context.WithCancel(context.Background())
			w, err := ld.c.Watch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			changed := make(chan time.Time, 1)
			go func() {
				defer w.Close()
				for {
					st, err := w.Next()
					if err != nil {
						return
					}
					if st.Role != api.RoleLeader {
						changed <- time.Now()
						return
					}
				}
			}()
			var at time.Time
			var lease time.Duration
			var others []*node
			for _, nd := range c.nodes {
				if nd != ld {
					others = append(others, nd)
				}
			}
			switch kind {
			case "resign":
				if err := ld.c.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				at = <-changed
			case "lease-loss":
				for _, nd := range others {
					nd.p.signal(t, syscall.SIGSTOP)
				}
				at = <-changed
			case "sigstop":
				st, err := ld.status()
				if err != nil {
					t.Fatal(err)
				}
				lease = st.Lease()
				at = time.Now()
				ld.p.signal(t, syscall.SIGSTOP)
			}
			var term time.Time
			waitFor(t, electWait, "the command to get SIGTERM", func() (bool, string) {
				b, err := os.ReadFile(filepath.Join(out, "term"))
				if err != nil {
					return false, "no SIGTERM yet"
				}
				ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				term = time.Unix(0, ns)
				return true, ""
			})
			d := term.Sub(at)
			results[kind] = append(results[kind], d)
			if kind == "sigstop" {
				leases = append(leases, lease)
				ld.p.signal(t, syscall.SIGCONT)
			}
			if kind == "lease-loss" {
				for _, nd := range others {
					nd.p.signal(t, syscall.SIGCONT)
				}
			}
			cancel()
			ex.signal(t, syscall.SIGTERM)
			ex.wait(t, exitWait)
			t.Logf("trial %d %s: SIGTERM %v after the change (lease at SIGSTOP %v)", trial+1, kind, d.Round(100*time.Microsecond), lease.Round(time.Millisecond))
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "agent exec: agent's status change → command gets SIGTERM (3 agents, election_timeout %v, %d trials)\n", electionTimeout, *measureExec)
	for _, kind := range []string{"resign", "lease-loss", "sigstop"} {
		ds := results[kind]
		slices.Sort(ds)
		fmt.Fprintf(&report, "%-11s min %v  median %v  worst %v\n", kind, ds[0].Round(100*time.Microsecond),
			percentile(ds, 50).Round(100*time.Microsecond), ds[len(ds)-1].Round(100*time.Microsecond))
	}
	slices.Sort(leases)
	fmt.Fprintf(&report, "lease left at SIGSTOP: min %v  worst %v\n", leases[0].Round(time.Millisecond), leases[len(leases)-1].Round(time.Millisecond))
	t.Logf("\n%s", report.String())
}
