package multihost

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// rejoinTrials is how many trials TestSingleSeedSplit and
// TestWipedRestartRejoins run: a few in CI, 20 for the figures of
// docs/multihost.md ("Cut off").
var rejoinTrials = flag.Int("rejoin-trials", 3, "trials of the single-seed split and wiped-restart tests (20 for docs/multihost.md)")

// splitDeadline bounds how long the survivors of a dead seed may take to
// find each other and elect. It is a failure deadline, well under
// memberlist's 30 s push-pull that used to be the only way they met; the
// measured times are logged and go to docs/multihost.md.
const splitDeadline = 10 * time.Second

// TestSingleSeedSplit: n1 is the seed everyone joins through, in bully.
// n4 joins first; then n2 and n3 start at the same instant, and n1 is
// killed as soon as it lists them. Each of the three may know the others
// only through n1's gossip, which n1 may not live to send: before
// rejoining they stayed apart, electing apart, until n1 came back or a
// push-pull, up to 30 s later, happened to pair them. Now a node that
// loses a member it reached joins through every address it knows and
// joins its live members again, which teaches each of them this node.
// (Majority elects the first time only once n1 is declared dead, about
// 5 s, whatever the membership: docs/multihost.md, "Cut off".)
func TestSingleSeedSplit(t *testing.T) {
	c := newCluster(t, 4, "bully")
	n1, n2, n3, n4 := c.host("n1"), c.host("n2"), c.host("n3"), c.host("n4")
	var took []time.Duration
	for trial := range *rejoinTrials {
		for _, h := range c.hosts {
			wipe(t, h)
		}
		c.start(n1)
		waitMembers(t, []*host{n1}, 1)
		c.start(n4)
		waitMembers(t, []*host{n1}, 2)
		c.start(n2)
		c.start(n3)
		waitFor(t, "n1 to list n2, n3 and n4", func() (bool, string) {
			ms, err := members(n1)
			return err == nil && len(ms) == 4, fmt.Sprint(ms, err)
		})
		c.kill(n1)
		killed := time.Now()
		var why string
		for {
			var ok bool
			if ok, why = agree(n2, n3, n4); ok {
				break
			}
			if time.Since(killed) > splitDeadline {
				t.Fatalf("trial %d: n2, n3 and n4 did not find each other and elect within %v of n1's death: %s", trial+1, splitDeadline, why)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(killed))
		t.Logf("trial %d: n2, n3 and n4 agreed %v after n1's death", trial+1, took[len(took)-1])
		for _, h := range c.hosts {
			c.kill(h)
		}
	}
	t.Logf("n1 killed; n2, n3 and n4 agreed on a leader after %v", summary(took))
}

// TestWipedRestartRejoins: n1, which has no gossip.join, is killed, its
// data directory emptied (no member snapshot, a new identity), and
// restarted. It can find nobody by itself; the others, which list it in
// gossip.join, see it answer gossip but not the transport, and join it
// again. Before, it waited for a push-pull, up to 30 s.
func TestWipedRestartRejoins(t *testing.T) {
	c := newCluster(t, 3, "majority")
	c.startAll()
	c.waitAgreement(0)
	n1 := c.host("n1")
	var took []time.Duration
	for trial := range *rejoinTrials {
		leader, _ := c.waitAgreement(0)
		killed := time.Now()
		c.kill(n1)
		if leader == n1.name {
			c.newLeaderAmong(c.live(), leader, killed)
		}
		wipe(t, n1)
		restarted := time.Now()
		c.start(n1)
		d := c.rejoin(n1, restarted)
		took = append(took, d)
		t.Logf("restart %d: wiped n1 rejoined %v after its restart", trial+1, d)
	}
	t.Logf("wiped n1 rejoined after %v", summary(took))
}

// wipe empties h's data directory, as a replaced disk would.
func wipe(t *testing.T, h *host) {
	t.Helper()
	ents, err := os.ReadDir(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(h.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func members(h *host) ([]api.Member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return h.c.Members(ctx)
}

// agree reports whether hs follow one leader, one of them, in one
// epoch, the leader saying so itself.
func agree(hs ...*host) (bool, string) {
	var desc strings.Builder
	var sts []api.Status
	for _, h := range hs {
		st, err := h.status()
		if err != nil {
			return false, fmt.Sprintf("%s: %v", h.name, err)
		}
		fmt.Fprintf(&desc, "%s: role=%s leader=%q epoch=%d problems=%q; ", h.name, st.Role, st.Leader, st.Epoch, st.Problems)
		sts = append(sts, st)
	}
	for i, st := range sts {
		if st.Leader == "" || st.Leader != sts[0].Leader || st.Epoch != sts[0].Epoch {
			return false, desc.String()
		}
		if st.Leader == hs[i].name && st.Role != api.RoleLeader {
			return false, desc.String()
		}
	}
	for _, h := range hs {
		if h.name == sts[0].Leader {
			return true, ""
		}
	}
	return false, desc.String()
}

// summary is the median and the worst of ds.
func summary(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "no trials"
	}
	return fmt.Sprintf("median %v, worst %v over %d", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
