package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
	"github.com/conclave-agent/conclave/membership"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	s, err := membership.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// step applies one rotation step to the ring of each agent in order.
func (tc *testCluster) step(t *testing.T, f func(keyring.Ring) (keyring.Ring, error), agents ...int) {
	t.Helper()
	for _, i := range agents {
		if _, err := tc.agents[i].changeRing(f); err != nil {
			t.Fatalf("n%d: %v", i+1, err)
		}
	}
}

// A full rotation on a running cluster (install, use, remove the old key,
// one agent at a time) keeps its leader and epoch, and survives a restart
// from the keyring file. A member that missed the install is refused once
// the old key is gone, and named in the others' problems.
func TestKeyRotation(t *testing.T) {
	oldKey, next := newKey(t), newKey(t)
	tc := newTestCluster(t, 4, "majority", keyring.Encode(oldKey))
	for i := range tc.cfgs {
		tc.cfgs[i].Election.Voters = []string{"n1", "n2", "n3"}
	}
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)

	in := []int{0, 1, 2} // n4, an observer, misses the install
	tc.step(t, func(r keyring.Ring) (keyring.Ring, error) { return r.Install(next) }, in...)
	tc.step(t, func(r keyring.Ring) (keyring.Ring, error) { return r.Install(next) }, in...) // idempotent
	tc.step(t, func(r keyring.Ring) (keyring.Ring, error) { return r.Use(next) }, in...)
	tc.step(t, func(r keyring.Ring) (keyring.Ring, error) { return r.Remove(oldKey) }, in...)

	for _, i := range in {
		st, err := tc.status(i)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != first.Leader || st.Epoch != first.Epoch {
			t.Errorf("n%d after the rotation: leader %s epoch %d, want %s %d unchanged", i+1, st.Leader, st.Epoch, first.Leader, first.Epoch)
		}
		r, err := keyring.Load(tc.cfgs[i].Node.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Primary(), next) || r.Has(oldKey) || len(r.Keys()) != 1 {
			t.Errorf("n%d keyring file: primary %s, %d keys, old key installed %v", i+1, keyring.Fingerprint(r.Primary()), len(r.Keys()), r.Has(oldKey))
		}
	}

	// n4 holds only the removed key: the others refuse it and say so.
	deadline := time.Now().Add(30 * time.Second)
	for {
		named := 0
		for _, i := range in {
			st, err := tc.status(i)
			if err == nil && strings.Contains(string(st.Problems), "member n4 proved none of this agent's installed cluster keys") {
				named++
			}
		}
		if named > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no agent names n4, which holds only the removed key, in its problems")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A restarted voter comes back on the keyring file, although its
	// configuration still names the old key, and the leader stays.
	follower := 0
	for i := range in {
		if tc.cfgs[i].Node.Name != first.Leader {
			follower = i
			break
		}
	}
	tc.stop(follower, false)
	if err := tc.start(follower); err != nil {
		t.Fatal(err)
	}
	tc.eventuallyStatus(t, 30*time.Second, func(i int, st api.Status) bool {
		return i == 3 || (st.Leader == first.Leader && st.Epoch == first.Epoch)
	})
	if tc.logs[follower].FilterMessageSnippet("gossip.key is not installed in the keyring").Len() == 0 {
		t.Error("the restarted agent did not warn that gossip.key is no longer installed")
	}
}
