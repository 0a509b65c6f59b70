package multihost

import (
	"strings"
	"testing"
	"time"
)

// TestKeyRotationAcrossHosts rotates the cluster key of five namespaced
// hosts with the CLI run on ONE host (n1), each step reaching every
// member through gossip, while a watcher reads every host's status
// stream: the leader and its epoch stay, and no epoch has two leaders.
// n5 is killed first: the install reaches [4/5], names n5 and exits
// non-zero, and a use is refused while n5 is down; once n5 is back the
// same install run again completes [5/5], and so do use and remove. Then
// n5 is down for a whole forced rotation: back with only the removed
// key, the others refuse it and name it in their problems.
func TestKeyRotationAcrossHosts(t *testing.T) {
	c := newCluster(t, 5, "majority")
	c.voters = []string{"n1", "n2", "n3", "n4"}
	for _, h := range c.hosts {
		c.configure(h, h.id)
	}
	c.startAll()
	leader, epoch := c.waitAgreement(0)
	w := c.watch()

	out, err := c.cli(c.hosts[0], "keygen")
	if err != nil {
		t.Fatal(err)
	}
	next := strings.TrimSpace(out)
	n1, n5 := c.hosts[0], c.host("n5")
	keys := func(args ...string) string {
		t.Helper()
		out, err := c.cli(n1, append([]string{"keys"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := keys("list"); !strings.Contains(out, c.key+"  ") || !strings.Contains(out, "[5/5]  primary") {
		t.Fatalf("agent keys list before the rotation:\n%s", out)
	}

	// n5 crashes: once gossip declares it dead, the install reaches the
	// other four, names n5 and fails the command.
	c.kill(n5)
	deadline := time.Now().Add(waitLimit)
	for {
		out, err := c.cli(n1, "keys", "install", next)
		if err != nil && strings.Contains(out, "[4/5] members acknowledged") && strings.Contains(out, "n5: down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("install with n5 killed, within %v: %v\n%s\nwant [4/5] naming n5 and a non-zero exit", waitLimit, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err := c.cli(n1, "keys", "use", next); err == nil || !strings.Contains(out, "n5 is down") || !strings.Contains(out, "no member changed") {
		t.Errorf("use while n5 is down: %v\n%s\nwant a refusal naming n5", err, out)
	}

	// n5 is back: the same install, run again, completes.
	c.start(n5)
	deadline = time.Now().Add(waitLimit)
	for {
		out, err := c.cli(n1, "keys", "install", next)
		if err == nil && strings.Contains(out, "[5/5] members acknowledged") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("install again with n5 back, within %v: %v\n%s", waitLimit, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, step := range [][]string{{"use", next}, {"use", next}, {"remove", c.key}, {"remove", c.key}} {
		if out := keys(step...); !strings.Contains(out, "[5/5] members acknowledged") {
			t.Fatalf("agent keys %s:\n%s", step[0], out)
		}
	}
	out = keys()
	if strings.Contains(out, c.key) || !strings.Contains(out, next+"  ") || !strings.Contains(out, "[5/5]  primary") {
		t.Errorf("agent keys after the rotation:\n%s", out)
	}
	// Every host holds the new key alone, as its own socket says.
	for _, h := range c.hosts {
		out, err := c.cli(h, "keys", "-local")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, c.key) || !strings.Contains(out, next+"  ") {
			t.Errorf("%s: agent keys -local after the rotation:\n%s", h.name, out)
		}
	}

	for _, h := range c.hosts[:4] {
		st, err := h.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != leader || st.Epoch != epoch {
			t.Errorf("%s after the rotation: leader %q epoch %d, want %q %d unchanged", h.name, st.Leader, st.Epoch, leader, epoch)
		}
	}
	w.finish(t)

	// A host down for a whole rotation: n5 misses the install and the
	// switch, forced past it, so once the key it holds is removed the
	// others refuse it when it comes back, and name it in their problems.
	c.kill(n5)
	out, err = c.cli(n1, "keygen")
	if err != nil {
		t.Fatal(err)
	}
	third := strings.TrimSpace(out)
	deadline = time.Now().Add(waitLimit)
	for {
		out, _ := c.cli(n1, "keys", "-force", "install", third)
		if strings.Contains(out, "[4/5] members acknowledged") && strings.Contains(out, "n5: down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forced install with n5 killed, within %v:\n%s", waitLimit, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, step := range [][]string{{"use", third}, {"remove", next}} {
		if out, _ := c.cli(n1, append([]string{"keys", "-force"}, step...)...); !strings.Contains(out, "[4/5] members acknowledged") {
			t.Fatalf("agent keys -force %s with n5 down:\n%s", step[0], out)
		}
	}
	c.start(n5)
	waitFor(t, "a host naming n5, which holds only the removed key, in its problems", func() (bool, string) {
		for _, h := range c.hosts[:4] {
			if st, err := h.status(); err == nil && strings.Contains(string(st.Problems), "member n5 proved none of this agent's installed cluster keys") {
				return true, ""
			}
		}
		return false, "no host names n5 yet"
	})
}
