package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var measureSocket = flag.Bool("measure.socket", false, "run TestMeasureSocketLimits (not for CI)")

// procFigures reads a process's resident memory and open descriptors.
func procFigures(t *testing.T, pid int) (rssKB int, fds int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			rssKB, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return rssKB, len(ents)
}

// statusLatency times n sequential /v1/status requests and returns the
// median and worst.
func statusLatency(t *testing.T, nd *node, n int) (time.Duration, time.Duration) {
	t.Helper()
	ds := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := nd.status(); err != nil {
			t.Fatalf("status: %v", err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

// TestMeasureSocketLimits opens 5,000 watch streams and then makes 10,000
// connection attempts (held open) on one agent at the default limits, and
// reports its memory, open files and /v1/status latency before and during.
// Run with
//
//	go test ./test/e2e/ -run TestMeasureSocketLimits -measure.socket -v
func TestMeasureSocketLimits(t *testing.T) {
	if !*measureSocket {
		t.Skip("runs only with -measure.socket")
	}
	c := newCluster(t, 1, "majority")
	c.startAll()
	c.waitAgreement(0)
	nd := c.nodes[0]
	pid := nd.p.pid()
	var report strings.Builder
	row := func(what string) {
		rss, fds := procFigures(t, pid)
		med, worst := statusLatency(t, nd, 200)
		fmt.Fprintf(&report, "%-34s rss %6.1f MB  fds %5d  status median %8v worst %8v\n", what, float64(rss)/1024, fds, med.Round(time.Microsecond), worst.Round(time.Microsecond))
	}
	row("idle")

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	okWatch, refused := 0, 0
	for range 5000 {
		c, err := net.Dial("unix", nd.socket)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "GET /v1/watch HTTP/1.1\r\nHost: agent\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		switch {
		case err != nil:
			t.Fatalf("watch answer: %v", err)
		case strings.Contains(line, " 200 "):
			okWatch++
		default:
			refused++
		}
	}
	fmt.Fprintf(&report, "5000 watch requests: %d streams open, %d refused with 503\n", okWatch, refused)
	row("with the watchers")

	for _, c := range held {
		c.Close()
	}
	held = held[:0]
	time.Sleep(500 * time.Millisecond)
	attempts, accepted, refusedConns, failed := 10000, 0, 0, 0
	for range attempts {
		c, err := net.Dial("unix", nd.socket)
		if err != nil {
			failed++
			continue
		}
		held = append(held, c)
	}
	// Those over the limit were answered with a 503 and closed.
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		b := make([]byte, 12)
		if n, _ := c.Read(b); n > 0 && strings.Contains(string(b[:n]), "503") {
			refusedConns++
		} else {
			accepted++
		}
	}
	fmt.Fprintf(&report, "%d connection attempts (held open): %d kept, %d refused with 503, %d failed to connect\n", attempts, accepted, refusedConns, failed)
	row("with the connections held")
	for _, c := range held {
		c.Close()
	}
	held = nil
	time.Sleep(time.Second)
	row("after")
	t.Logf("\n%s", report.String())
}
