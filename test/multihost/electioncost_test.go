package multihost

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cost of named elections in docs/elections.md comes from
//
//	CONCLAVE_MULTIHOST_MEASURE=1 go test -count=1 -v -timeout 30m -run TestMeasureElectionCost ./test/multihost
//
// Five hosts run 1, 10 and 50 idle majority elections (the default one
// and 9 or 49 named ones over the same five voters, in one fate-sharing
// group so that one agent leads them all), in that order and again, side
// by side in one run; each agent's CPU is read from /proc
// over CONCLAVE_MULTIHOST_WINDOW (default 30 s). Without the variable
// the test skips: it takes minutes, and its figures are not asserted.

// cpuTicks is a process's user and system time so far, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it do not.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return u + st, nil
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

// cpuShares lets window pass and returns each host's agent CPU over it,
// user + system, as a share of one core, in hs's order.
func cpuShares(t *testing.T, hs []*host, window time.Duration) []float64 {
	t.Helper()
	before := make([]int64, len(hs))
	for i, h := range hs {
		v, err := cpuTicks(h.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		before[i] = v
	}
	start := time.Now()
	time.Sleep(window)
	took := time.Since(start).Seconds()
	shares := make([]float64, len(hs))
	for i, h := range hs {
		v, err := cpuTicks(h.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		shares[i] = float64(v-before[i]) / clockTick / took
	}
	return shares
}

func TestMeasureElectionCost(t *testing.T) {
	if os.Getenv("CONCLAVE_MULTIHOST_MEASURE") == "" {
		t.Skip("set CONCLAVE_MULTIHOST_MEASURE=1 to measure (minutes)")
	}
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("CONCLAVE_MULTIHOST_WINDOW")); err == nil && d > 0 {
		window = d
	}
	type row struct {
		elections        int
		leader, follower float64 // share of one core; follower: the median of four
	}
	var rows []row
	loadBefore := loadavg()
	for _, n := range []int{1, 10, 50, 1, 10, 50} {
		var extra strings.Builder
		for i := 1; i < n; i++ {
			fmt.Fprintf(&extra, "[elections.e%02d]\nprotocol = \"majority\"\n", i)
		}
		c := newCluster(t, 5, "majority")
		// One fate-sharing group: one agent leads every election, the
		// leader's worst case.
		c.electionKeys = "group = \"all\"\n"
		for _, h := range c.hosts {
			h.extra = extra.String()
			c.configure(h, h.id)
		}
		c.startAll()
		var leaders map[string]int
		agreed := func() (bool, string) {
			leaders = map[string]int{}
			for i := 0; i < n; i++ {
				name := "default"
				if i > 0 {
					name = fmt.Sprintf("e%02d", i)
				}
				l, _, why := electionAgreement(c.hosts, name, 0)
				if why != "" {
					return false, name + ": " + why
				}
				leaders[l]++
			}
			return len(leaders) == 1, fmt.Sprintf("leaders %v: the group has not gathered yet", leaders)
		}
		waitFor(t, fmt.Sprintf("%d elections agreed, with one leader", n), agreed)
		// Start-up work (joins, first detector samples) settles first.
		time.Sleep(5 * time.Second)
		waitFor(t, fmt.Sprintf("%d elections still agreed", n), agreed)
		shares := cpuShares(t, c.hosts, window)
		// The agent that leads the most elections is "the leader"; every
		// election's leader is found first, and with majority and
		// randomised timeouts they may spread over several agents.
		top, topN := "", -1
		for l, k := range leaders {
			if k > topN {
				top, topN = l, k
			}
		}
		var r row
		r.elections = n
		var fs []float64
		for i, h := range c.hosts {
			if h.name == top {
				r.leader = shares[i]
			} else {
				fs = append(fs, shares[i])
			}
		}
		r.follower = medianOf(fs)
		t.Logf("%d elections: leaders %v; cpu per agent %v", n, leaders, shares)
		rows = append(rows, r)
		c.close()
	}
	var b strings.Builder
	b.WriteString("| elections | leader CPU | × one election | follower CPU (median of 4) | × one election |\n|---|---|---|---|---|\n")
	base := map[int]row{}
	for _, r := range rows {
		if _, ok := base[1]; !ok && r.elections == 1 {
			base[1] = r
		}
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %.2f%% | %.1f | %.2f%% | %.1f |\n", r.elections, 100*r.leader, r.leader/base[1].leader, 100*r.follower, r.follower/base[1].follower)
	}
	fmt.Fprintf(&b, "\nwindow %v per row; load average (1, 5, 15 min) before: %s; after: %s\n", window, loadBefore, loadavg())
	t.Logf("\n%s", b.String())
	if out := os.Getenv("CONCLAVE_MULTIHOST_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
