package e2e

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

var (
	measure       = flag.Bool("measure", false, "run TestMeasure: failover times and socket latency (minutes; not for CI)")
	measureTrials = flag.Int("measure.trials", 10, "TestMeasure: failovers per protocol")
	measureRate   = flag.Int("measure.rate", 1000, "TestMeasure: /v1/status requests per second (0: skip)")
	measureFor    = flag.Duration("measure.duration", 5*time.Second, "TestMeasure: how long to send /v1/status requests")
	measureProtos = flag.String("measure.protocols", "majority,bully,ring", "TestMeasure: comma-separated protocols to fail over")
	measureFlags  = flag.String("measure.flags", "", "TestMeasure: extra agent flags for the failovers, space-separated (e.g. a timing profile of config.example.toml)")
)

// TestMeasure prints measured figures; it asserts nothing about them (only
// that each failover happens within the usual bounded wait). Run with
//
//	go test ./test/e2e/ -run TestMeasure -measure -v -timeout 30m
func TestMeasure(t *testing.T) {
	if !*measure {
		t.Skip("measurements run only with -measure")
	}
	var report strings.Builder
	fmt.Fprintf(&report, "failover: SIGKILL of the leader → every survivor reports the same new leader (5 agents, election_timeout %v and heartbeat %v unless the extra flags %q say otherwise, %d trials)\n",
		electionTimeout, heartbeatInterval, *measureFlags, *measureTrials)
	fmt.Fprintf(&report, "%-9s %8s %8s %8s %8s\n", "protocol", "min", "median", "p90", "worst")
	for _, protocol := range strings.Split(*measureProtos, ",") {
		ds := measureFailover(t, protocol, *measureTrials)
		fmt.Fprintf(&report, "%-9s %8v %8v %8v %8v\n", protocol,
			ds[0].Round(time.Millisecond), percentile(ds, 50).Round(time.Millisecond),
			percentile(ds, 90).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		t.Logf("%s failovers: %v", protocol, ds)
	}
	if *measureRate > 0 {
		measureStatusLatency(t, &report)
	}
	t.Logf("\n%s", report.String())
	fmt.Println(report.String())
}

// percentile returns the p-th percentile of sorted ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	i := (len(ds)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return ds[i-1]
}

// observation is one status a watcher saw, with when it arrived.
type observation struct {
	node string
	st   api.Status
	at   time.Time
}

// measureFailover kills the leader of a 5-agent cluster trials times
// (restarting it between trials) and returns the sorted times from the
// SIGKILL to the moment the last survivor reports the agreed new leader,
// as seen on the survivors' watch streams.
func measureFailover(t *testing.T, protocol string, trials int) []time.Duration {
	c := newCluster(t, 5, protocol, strings.Fields(*measureFlags)...)
	c.startAll()
	var out []time.Duration
	for trial := range trials {
		want := ""
		if protocol == "bully" {
			want = highest(c.live())
		}
		before := c.waitLeader(0, want)
		time.Sleep(2 * time.Second) // steady state: detectors have samples
		before = c.waitLeader(0, want)
		old := c.byName(before.leader)
		var survivors []*node
		for _, nd := range c.live() {
			if nd != old {
				survivors = append(survivors, nd)
			}
		}

		ctx, cancel := context.WithCancel(context.Background())
		obs := make(chan observation, 1024)
		var wg sync.WaitGroup
		for _, nd := range survivors {
			w, err := nd.c.Watch(ctx)
			if err != nil {
				cancel()
				t.Fatalf("watch %s: %v", nd.name, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer w.Close()
				for {
					st, err := w.Next()
					if err != nil {
						return
					}
					select {
					case obs <- observation{nd.name, st, time.Now()}:
					case <-ctx.Done():
						return
					}
				}
			}()
		}

		old.p.signal(t, syscall.SIGKILL)
		killed := time.Now()
		latest := map[string]api.Status{}
		var agreedAt time.Time
		timeout := time.After(electWait)
		for agreedAt.IsZero() {
			select {
			case o := <-obs:
				latest[o.node] = o.st
				if agreeOn(latest, survivors, before) {
					agreedAt = o.at
				}
			case <-timeout:
				cancel()
				wg.Wait()
				t.Fatalf("%s trial %d: no agreement within %v after killing %s; latest %+v", protocol, trial, electWait, old.name, latest)
			}
		}
		cancel()
		wg.Wait()
		d := agreedAt.Sub(killed)
		out = append(out, d)
		t.Logf("%s trial %d: killed %s (epoch %d): %s agreed in %v", protocol, trial, old.name, before.epoch, latest[survivors[0].name].Leader, d.Round(time.Millisecond))

		old.p.wait(t, exitWait)
		c.start(slices.Index(c.nodes, old))
	}
	slices.Sort(out)
	return out
}

// agreeOn reports whether every survivor's latest status names the same
// new leader, a survivor that calls itself leader, in an epoch above
// before's.
func agreeOn(latest map[string]api.Status, survivors []*node, before agreement) bool {
	first, ok := latest[survivors[0].name]
	if !ok || first.Leader == "" || first.Leader == before.leader || first.Epoch <= before.epoch {
		return false
	}
	for _, nd := range survivors {
		st, ok := latest[nd.name]
		if !ok || st.Leader != first.Leader || st.Epoch != first.Epoch {
			return false
		}
		if (nd.name == first.Leader) != (st.Role == api.RoleLeader) {
			return false
		}
	}
	return true
}

// measureStatusLatency sends *measureRate /v1/status requests a second for
// *measureFor to the leader of a 3-agent majority cluster, each on the
// schedule (so a slow answer does not hide the ones queued behind it), and
// reports p50/p99/max latency from the scheduled send time.
func measureStatusLatency(t *testing.T, report *strings.Builder) {
	c := newCluster(t, 3, "majority")
	c.startAll()
	lead := c.byName(c.waitAgreement(0).leader)
	time.Sleep(time.Second)

	const workers = 32
	type job struct{ at time.Time }
	jobs := make(chan job, 4096)
	var (
		mu       sync.Mutex
		lat, svc []time.Duration
		errs     int
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client.New(lead.socket) // one connection per worker
			defer cl.Close()
			for j := range jobs {
				if d := time.Until(j.at); d > 0 {
					time.Sleep(d)
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := cl.Status(ctx)
				cancel()
				end := time.Now()
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, end.Sub(j.at))
					svc = append(svc, end.Sub(start))
				}
				mu.Unlock()
			}
		}()
	}
	n := int(measureFor.Seconds() * float64(*measureRate))
	interval := time.Second / time.Duration(*measureRate)
	begin := time.Now().Add(10 * time.Millisecond)
	for i := range n {
		jobs <- job{at: begin.Add(time.Duration(i) * interval)}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(begin)
	slices.Sort(lat)
	slices.Sort(svc)
	if len(lat) == 0 {
		t.Fatalf("no /v1/status request succeeded (%d errors)", errs)
	}
	fmt.Fprintf(report, "\n/v1/status on the leader of 3 agents (majority), %d req/s for %v over its Unix socket: %d ok, %d errors, achieved %.0f req/s\n",
		*measureRate, *measureFor, len(lat), errs, float64(len(lat))/took.Seconds())
	fmt.Fprintf(report, "%-28s %8s %8s %8s\n", "", "p50", "p99", "max")
	fmt.Fprintf(report, "%-28s %8v %8v %8v\n", "from scheduled send", percentile(lat, 50).Round(time.Microsecond), percentile(lat, 99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Fprintf(report, "%-28s %8v %8v %8v\n", "request round trip", percentile(svc, 50).Round(time.Microsecond), percentile(svc, 99).Round(time.Microsecond), svc[len(svc)-1].Round(time.Microsecond))
}
