package multihost

import (
	"strings"
	"testing"
	"time"
)

// TestKeyRotationAcrossHosts rotates the cluster key of five namespaced
// hosts with the CLI, one host at a time per step (install, use, remove
// the old key), while a watcher reads every host's status stream: the
// leader and its epoch stay, and no epoch has two leaders. n5 misses the
// install; once the old key is removed, the others refuse it and name it
// in their problems.
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
	in := c.hosts[:4]
	for _, step := range [][]string{{"install", next}, {"install", next}, {"use", next}, {"remove", c.key}} {
		for _, h := range in {
			if _, err := c.cli(h, append([]string{"keys"}, step...)...); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range in {
		out, err := c.cli(h, "keys")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, c.key) || !strings.Contains(out, next+"  ") || !strings.Contains(out, "primary") {
			t.Errorf("%s: agent keys after the rotation:\n%s", h.name, out)
		}
	}

	// n5 still holds only the old key: refused and named.
	deadline := time.Now().Add(waitLimit)
	for named := false; !named; {
		for _, h := range in {
			if st, err := h.status(); err == nil && strings.Contains(string(st.Problems), "member n5 proved none") {
				named = true
			}
		}
		if !named && time.Now().After(deadline) {
			t.Fatalf("no host names n5, which missed the install, in its problems within %v", waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, h := range in {
		st, err := h.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != leader || st.Epoch != epoch {
			t.Errorf("%s after the rotation: leader %q epoch %d, want %q %d unchanged", h.name, st.Leader, st.Epoch, leader, epoch)
		}
	}
	w.finish(t)
}
