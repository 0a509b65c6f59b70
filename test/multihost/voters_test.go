package multihost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// TestMismatchedVoterLists is issue 14's operator mistake on real hosts:
// n1's config file says voters = ["n1"] (config.example.toml's value), n2's
// and n3's list all three. n1 is then cut off from the others, again and
// again. No epoch may ever have two leaders, and the disagreement must be
// visible in `agent status`. Then the operator follows the problem line's
// advice and the three become one cluster.
func TestMismatchedVoterLists(t *testing.T) {
	c := newCluster(t, 3, "majority")
	n1 := c.host("n1")
	b, err := os.ReadFile(n1.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	i := strings.Index(cfg, "voters = [")
	j := strings.Index(cfg[i:], "\n")
	cfg = cfg[:i] + `voters = ["n1"]` + cfg[i+j:]
	if err := os.WriteFile(n1.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// Every host's status is polled throughout; two hosts saying
	// role=leader for one epoch fail the test.
	var (
		mu      sync.Mutex
		leaders = map[uint64]string{}
		twice   string
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, h := range c.hosts {
				st, err := h.status()
				if err != nil || st.Role != api.RoleLeader {
					continue
				}
				mu.Lock()
				if prev, ok := leaders[st.Epoch]; ok && prev != st.Node && twice == "" {
					twice = fmt.Sprintf("%s and %s both led epoch %d", prev, st.Node, st.Epoch)
				}
				leaders[st.Epoch] = st.Node
				mu.Unlock()
			}
		}
	}()

	c.startAll()
	// n1 is the gossip seed, so it starts alone and, a sole voter, forms
	// its own cluster at once; n2 and n3 then meet a formed cluster that
	// leaves them out and wait (the operator adds them: below). Or, if
	// gossip is quicker, n1 meets their longer list first and stands
	// down. Either way one of the two groups leads.
	waitFor(t, "a leader", func() (bool, string) {
		for _, h := range c.hosts {
			if st, err := h.status(); err == nil && st.Role == api.RoleLeader {
				return true, ""
			}
		}
		return false, "nobody leads"
	})
	waitFor(t, "the conflict to show in some host's 'agent status'", func() (bool, string) {
		var seen strings.Builder
		for _, h := range c.hosts {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, err := exec.CommandContext(ctx, agentBin, "status", "-socket", h.c.Socket()).CombinedOutput()
			cancel()
			if err != nil {
				fmt.Fprintf(&seen, "%s: %v; ", h.name, err)
				continue
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "PROBLEM") && strings.Contains(line, "[n1]") && strings.Contains(line, "n2") {
					t.Logf("%s: %s", h.name, line)
					return true, ""
				}
			}
			fmt.Fprintf(&seen, "%s: no problem line; ", h.name)
		}
		return false, seen.String()
	})

	for round := 1; round <= 3; round++ {
		if err := c.net.Unplug(context.Background(), "n1"); err != nil {
			t.Fatal(err)
		}
		// Long enough for n1's election timeouts to fire many times
		// and for gossip to declare the others dead to it.
		time.Sleep(6 * time.Second)
		st, err := n1.status()
		t.Logf("round %d: n1 cut off: role=%s leader=%q epoch=%d problems=%q (%v)", round, st.Role, st.Leader, st.Epoch, st.Problems.List(), err)
		if err := c.net.Plug(context.Background(), "n1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		for _, h := range c.hosts {
			st, err := h.status()
			t.Logf("round %d: n1 back: %s role=%s leader=%q epoch=%d (%v)", round, h.name, st.Role, st.Leader, st.Epoch, err)
		}
	}
	// The way out the problem line names: n1's cluster adds the others,
	// from n1's socket (n1 leads; the others wait to be added).
	for _, name := range []string{"n2", "n3"} {
		waitFor(t, "agent voters add "+name+" on n1", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, agentBin, "voters", "-socket", n1.c.Socket(), "add", name).CombinedOutput()
			return err == nil, string(out)
		})
	}
	leader, epoch := c.waitAgreement(0)
	t.Logf("after adding n2 and n3 on n1: %s leads epoch %d", leader, epoch)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if twice != "" {
		t.Fatal(twice)
	}
	t.Logf("leaders by epoch: %v", leaders)
}
