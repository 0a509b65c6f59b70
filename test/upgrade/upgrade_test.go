package upgrade

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/store"
)

// TestRollingUpgrade upgrades a five-agent cluster of the previous release
// to the tree one agent at a time, for each protocol, and then rolls one
// agent back (see step for what each step does and checks). It skips when
// this clone lacks the release's commit; see docs/compatibility.md.
func TestRollingUpgrade(t *testing.T) {
	rel := previous()
	old := binary{name: rel.version, path: buildRelease(t, rel)}
	tree := binary{name: "tree", path: treeBin}
	for _, b := range []binary{old, tree} {
		out, err := exec.Command(b.path, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: agent version: %v: %s", b.name, err, out)
		}
		t.Logf("%s: %s", b.name, strings.TrimSpace(string(out)))
	}
	// Both releases make a cluster key; the tree's seeds the keyed run.
	out, err := exec.Command(tree.path, "keygen").Output()
	if err != nil {
		t.Fatalf("agent keygen: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if _, err := exec.Command(old.path, "keygen").Output(); err != nil {
		t.Fatalf("%s: agent keygen: %v", old.name, err)
	}

	// Each protocol without a cluster key, and majority with one: a keyed
	// release admits libp2p peers with a private network (pnet) under its
	// one key, the tree with a handshake over every installed key, and
	// speaks pnet to agents gossip names as the release's version
	// (transport/pnetcompat.go). One keyed protocol is enough: the
	// connection, not the election, is what the key changes.
	runs := []struct {
		name, protocol, key string
	}{
		{"majority", "majority", ""},
		{"bully", "bully", ""},
		{"ring", "ring", ""},
		{"majority-keyed", "majority", key},
	}
	for _, run := range runs {
		protocol := run.protocol
		t.Run(run.name, func(t *testing.T) {
			c := newCluster(t, 5, protocol, old, run.key)
			r := c.record()
			for _, nd := range c.nodes {
				c.start(nd, old)
			}
			a, took := c.waitAgreed("the release's cluster forms", c.nodes, 0, c.want(c.nodes), rejoinBound)
			t.Logf("all on %s: %s leads in epoch %d (agreed %v after the start)", old.name, a.leader, a.epoch, took.Round(time.Millisecond))
			c.checkRecord(r, "start")

			released := a
			for _, nd := range c.nodes {
				a = c.step(r, a, nd, tree, "upgrade "+nd.name)
			}
			// Every data directory of the release runs as the tree's
			// election "default", its state where the release kept it,
			// its epoch carried on (the recorder also checks that no
			// agent's epoch ever went back).
			for _, nd := range c.nodes {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				els, err := nd.c.Elections(ctx)
				cancel()
				if err != nil || len(els) != 1 || els[0].Election != "default" || els[0].Epoch < released.epoch || els[0].Epoch != a.epoch {
					t.Fatalf("%s after the upgrade: elections %+v, %v; want only default, in epoch %d (the release's %d or later)", nd.name, els, err, a.epoch, released.epoch)
				}
				if _, err := os.Stat(filepath.Join(nd.dataDir, store.FileName)); err != nil {
					t.Fatalf("%s: the default election's state left the top of its data directory: %v", nd.name, err)
				}
			}
			// Roll the leader back: the release reads a data directory
			// the tree wrote, and leads (bully, ring: it has the highest
			// id) or follows agents of the tree.
			a = c.step(r, a, c.byName(a.leader), old, "roll back "+a.leader)
			r.stop()
			c.checkRecord(r, "the end")
			t.Logf("%d statuses recorded from the watch streams, no violation", r.count())
		})
	}
}

// step replaces target's binary with bin: it SIGKILLs target and the
// leader (both at once, when target does not lead), waits up to
// failoverBound for the survivors — of both binaries, as the cluster
// stands — to agree on a new leader in a higher epoch, restarts the
// killed agents from their data directories (target on bin, the leader on
// what it ran), and waits up to rejoinBound for all five to agree. With
// two of five agents down, every survivor's vote or message is needed, so
// a survivor that cannot talk to the others' version stops the election.
// Then each release's CLI asks an agent of the other, and the recorded
// statuses are checked. It returns the final agreement.
func (c *cluster) step(r *recorder, prev agreement, target *node, bin binary, what string) agreement {
	t := c.t
	t.Helper()
	r.setStep(what)
	leader := c.byName(prev.leader)
	killed := []*node{target}
	if leader != target {
		killed = append(killed, leader)
	}
	var names []string
	for _, nd := range killed {
		nd.p.kill(t)
		names = append(names, nd.name)
	}
	survivors := c.live()
	a, failover := c.waitAgreed(what+": failover", survivors, prev.epoch, c.want(survivors), failoverBound)
	for _, nd := range killed {
		if nd == target {
			c.start(nd, bin)
		} else {
			c.start(nd, nd.bin)
		}
	}
	final, rejoin := c.waitAgreed(what+": rejoin", c.nodes, a.epoch-1, c.want(c.nodes), rejoinBound)
	if final.epoch < a.epoch {
		t.Fatalf("%s: the cluster agreed on epoch %d after the failover's %d", what, final.epoch, a.epoch)
	}
	t.Logf("%-14s killed %-6s -> %s leads epoch %d after %v; restarted -> %s leads epoch %d after %v; binaries %s",
		what+":", strings.Join(names, ","), a.leader, a.epoch, failover.Round(time.Millisecond),
		final.leader, final.epoch, rejoin.Round(time.Millisecond), c.binaries())
	c.crossCheckCLI(final, what)
	c.checkRecord(r, what)
	return final
}

// crossCheckCLI asks, with each binary's `agent status -json`, one agent
// that runs another binary, and checks the answer names the agreed leader
// and epoch: the socket API read across versions in both directions.
func (c *cluster) crossCheckCLI(a agreement, what string) {
	t := c.t
	t.Helper()
	seen := map[string]binary{}
	for _, nd := range c.nodes {
		seen[nd.bin.name] = nd.bin
	}
	for _, b := range seen {
		for _, nd := range c.nodes {
			if nd.bin.name == b.name {
				continue
			}
			st := askWithCLI(t, b, nd)
			if st.Leader != a.leader || st.Epoch != a.epoch || st.Node != nd.name {
				t.Fatalf("%s: %s's CLI read %s (%s) as node=%q leader=%q epoch=%d, want node=%q leader=%q epoch=%d",
					what, b.name, nd.name, nd.bin.name, st.Node, st.Leader, st.Epoch, nd.name, a.leader, a.epoch)
			}
			break
		}
	}
}

// binaries describes which binary each agent runs.
func (c *cluster) binaries() string {
	var parts []string
	for _, nd := range c.nodes {
		parts = append(parts, fmt.Sprintf("%s=%s", nd.name, nd.bin.name))
	}
	return strings.Join(parts, " ")
}

// checkRecord fails the test if the recorded statuses break an invariant.
func (c *cluster) checkRecord(r *recorder, when string) {
	c.t.Helper()
	if v := r.violations(); len(v) > 0 {
		c.t.Fatalf("after %s: %d violations:\n%s", when, len(v), strings.Join(v, "\n"))
	}
}
