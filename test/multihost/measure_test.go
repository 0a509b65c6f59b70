package multihost

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The figures of docs/multihost.md come from
//
//	CONCLAVE_MULTIHOST_MEASURE=1 go test -count=1 -v -timeout 30m -run TestMeasure ./test/multihost
//
// CONCLAVE_MULTIHOST_ROUNDS overrides the 20 rounds. Without the variable
// the test skips: it takes minutes.

type series struct {
	name string
	d    []time.Duration
}

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

func (s *series) String() string {
	if len(s.d) == 0 {
		return fmt.Sprintf("| %s | 0 | | | |", s.name)
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	ms := func(x time.Duration) string { return fmt.Sprintf("%.0f ms", float64(x)/float64(time.Millisecond)) }
	return fmt.Sprintf("| %s | %d | %s | %s | %s |", s.name, len(d), ms(d[len(d)/2]), ms(d[len(d)*9/10]), ms(d[len(d)-1]))
}

func TestMeasure(t *testing.T) {
	if os.Getenv("CONCLAVE_MULTIHOST_MEASURE") == "" {
		t.Skip("set CONCLAVE_MULTIHOST_MEASURE=1 to measure (minutes)")
	}
	rounds := 20
	if v, err := strconv.Atoi(os.Getenv("CONCLAVE_MULTIHOST_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var rows []string
	loadBefore := loadavg()

	// Three hosts: cold election, then SIGKILL of the leader and restart.
	{
		elect := &series{name: "3 hosts: start to agreed leader"}
		fail := &series{name: "3 hosts: SIGKILL of the leader to a new leader"}
		back := &series{name: "3 hosts: restart of the killed leader to full agreement"}
		c := newCluster(t, 3, "majority")
		started := time.Now()
		c.startAll()
		c.waitAgreement(0)
		elect.add(time.Since(started))
		for range 10 {
			leader, _ := c.waitAgreement(0)
			old := c.host(leader)
			killed := time.Now()
			c.kill(old)
			_, took := c.newLeaderAmong(c.live(), leader, killed)
			fail.add(took)
			restarted := time.Now()
			c.start(old)
			back.add(c.rejoin(old, restarted))
		}
		c.close()
		rows = append(rows, elect.String(), fail.String(), back.String())
	}

	// Five hosts, rounds × (leader, bootstrap node n1, random follower).
	c := newCluster(t, 5, "majority")
	c.startAll()
	c.waitAgreement(0)
	rng := rand.New(rand.NewPCG(1, 2))
	fail := &series{name: "5 hosts: SIGKILL of the leader to a new leader"}
	rejoin := map[string]*series{
		"leader":    {name: "5 hosts: restarted leader rejoins"},
		"bootstrap": {name: "5 hosts: restarted n1 (no gossip.join) rejoins"},
		"follower":  {name: "5 hosts: restarted random follower rejoins"},
	}
	all := &series{name: "5 hosts: every restart rejoins"}
	for r := range rounds {
		for _, kind := range []string{"leader", "bootstrap", "follower"} {
			leader, _ := c.waitAgreement(0)
			var victim *host
			switch kind {
			case "leader":
				victim = c.host(leader)
			case "bootstrap":
				victim = c.host("n1")
			default:
				var fs []*host
				for _, h := range c.hosts {
					if h.name != leader && h.name != "n1" {
						fs = append(fs, h)
					}
				}
				victim = fs[rng.IntN(len(fs))]
			}
			killed := time.Now()
			c.kill(victim)
			if victim.name == leader {
				_, took := c.newLeaderAmong(c.live(), leader, killed)
				fail.add(took)
			}
			restarted := time.Now()
			c.start(victim)
			took := c.rejoin(victim, restarted)
			rejoin[kind].add(took)
			all.add(took)
			t.Logf("round %d %s %s: rejoined in %v", r+1, kind, victim.name, took)
		}
	}
	rows = append(rows, fail.String(), rejoin["leader"].String(), rejoin["bootstrap"].String(), rejoin["follower"].String(), all.String())
	table := "| what | n | median | p90 | worst |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n") +
		fmt.Sprintf("\n\nload average (1, 5, 15 min) before: %s; after: %s\n", loadBefore, loadavg())
	t.Logf("\n%s", table)
	if out := os.Getenv("CONCLAVE_MULTIHOST_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadavg returns the machine's load averages: figures taken while other
// work starves the agents are not comparable with quiet ones.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// measureBaseline returns the baseline build a side-by-side measurement
// runs beside this one (CONCLAVE_MULTIHOST_BASELINE), or skips the test
// unless CONCLAVE_MULTIHOST_MEASURE is set too: such a test takes minutes
// and asserts no figure.
func measureBaseline(t *testing.T) string {
	t.Helper()
	baseline := os.Getenv("CONCLAVE_MULTIHOST_BASELINE")
	if os.Getenv("CONCLAVE_MULTIHOST_MEASURE") == "" || baseline == "" {
		t.Skip("set CONCLAVE_MULTIHOST_MEASURE=1 and CONCLAVE_MULTIHOST_BASELINE=/path/to/agent to measure (minutes)")
	}
	return baseline
}

// envDuration reads a duration from the environment variable name, or
// returns def when it is unset or not a positive duration.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
