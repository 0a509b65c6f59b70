package agent

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/ratelog"
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

// keysVia runs one cluster-wide key step (op "" lists) through agent i's
// socket with the real client, as agent keys does.
func (tc *testCluster) keysVia(i int, op string, key []byte, force bool) (api.KeyReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := client.New(tc.cfgs[i].API.Socket)
	defer c.Close()
	if op == "" {
		return c.ClusterKeys(ctx)
	}
	return c.ChangeClusterKeys(ctx, op, keyring.Encode(key), force)
}

// A rotation driven from one agent through gossip: each step reaches
// every member ([3/3]) and runs again harmlessly; use and remove are
// refused before any member changes when a member is not ready. With a
// follower crashed the step reaches [2/3] and names it; once it is back,
// the same step run again completes. The leader stays throughout.
func TestClusterKeyRotation(t *testing.T) {
	oldKey, next, third := newKey(t), newKey(t), newKey(t)
	tc := newTestCluster(t, 3, "majority", keyring.Encode(oldKey))
	tc.startAll()
	first := tc.waitAgreed(0, 30*time.Second)
	step := func(op string, key []byte, force bool) api.KeyReport {
		t.Helper()
		rep, err := tc.keysVia(0, op, key, force)
		if err != nil {
			t.Fatalf("keys %s: %v", op, err)
		}
		return rep
	}
	wantAll := func(rep api.KeyReport) {
		t.Helper()
		if rep.Members != 3 || rep.Acked != 3 || len(rep.Failed) != 0 {
			t.Fatalf("keys %s %s: [%d/%d], failed %+v; want [3/3]", rep.Op, rep.Fingerprint, rep.Acked, rep.Members, rep.Failed)
		}
	}
	rep := step("", nil, false)
	wantAll(rep)
	if len(rep.Keys) != 1 || rep.Keys[0].Key != keyring.Encode(oldKey) || rep.Keys[0].Installed != 3 || rep.Keys[0].Primary != 3 {
		t.Fatalf("keys list: %+v", rep.Keys)
	}

	// use before install: refused, naming every member, and nothing changes.
	if _, err := tc.keysVia(0, api.KeyUse, next, false); err == nil || !strings.Contains(err.Error(), "n1 lacks it, n2 lacks it, n3 lacks it") {
		t.Fatalf("use of a key no member holds: %v", err)
	}
	for range 2 {
		wantAll(step(api.KeyInstall, next, false))
	}
	for range 2 {
		wantAll(step(api.KeyUse, next, false))
	}
	// The new key is everyone's primary: removing it is refused, even forced.
	if _, err := tc.keysVia(0, api.KeyRemove, next, true); err == nil || !strings.Contains(err.Error(), "uses it as its primary") {
		t.Fatalf("remove of the primary: %v", err)
	}
	for range 2 {
		wantAll(step(api.KeyRemove, oldKey, false))
	}
	rep = step("", nil, false)
	wantAll(rep)
	if len(rep.Keys) != 1 || rep.Keys[0].Key != keyring.Encode(next) || rep.Keys[0].Primary != 3 {
		t.Fatalf("keys list after the rotation: %+v", rep.Keys)
	}
	for i := range tc.agents {
		r, err := keyring.Load(tc.cfgs[i].Node.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Primary(), next) || len(r.Keys()) != 1 {
			t.Errorf("n%d keyring file: primary %s, %d keys", i+1, keyring.Fingerprint(r.Primary()), len(r.Keys()))
		}
	}

	// A follower other than n1 crashes (the leader stays): once gossip
	// declares it dead, a step reaches [2/3] and names it; a use is
	// refused while it is down.
	down := 2
	if first.Leader == "n3" {
		down = 1
	}
	name := tc.cfgs[down].Node.Name
	tc.stop(down, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep = step(api.KeyInstall, third, false)
		if rep.Members == 3 && rep.Acked == 2 && len(rep.Failed) == 1 && strings.Contains(rep.Failed[0].Error, "down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with %s crashed: [%d/%d], failed %+v; want [2/3] naming it down", name, rep.Acked, rep.Members, rep.Failed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rep.Failed[0].Member != name {
		t.Errorf("the member named is %q, want %s", rep.Failed[0].Member, name)
	}
	if _, err := tc.keysVia(0, api.KeyUse, third, false); err == nil || !strings.Contains(err.Error(), name+" is down") {
		t.Errorf("use while %s is down: %v; want a refusal naming it", name, err)
	}
	if err := tc.start(down); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		rep, err := tc.keysVia(0, api.KeyInstall, third, false)
		if err == nil && rep.Acked == 3 && rep.Members == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("install again with %s back: %+v, %v; want [3/3]", name, rep, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep = step("", nil, false)
	wantAll(rep)
	if len(rep.Keys) != 2 || rep.Keys[1].Key != keyring.Encode(third) || rep.Keys[1].Installed != 3 || rep.Keys[1].Primary != 0 {
		t.Errorf("keys list with %s back: %+v", name, rep.Keys)
	}
	for i := range tc.agents {
		if i == down {
			continue // restarted: it learns the leader anew
		}
		st, err := tc.status(i)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != first.Leader || st.Epoch != first.Epoch {
			t.Errorf("n%d: leader %s epoch %d, want %s %d unchanged", i+1, st.Leader, st.Epoch, first.Leader, first.Epoch)
		}
	}
}

// A key request is answered once: one sent beyond keyRequestMaxAge from
// this agent's clock, one whose id was already answered, and one of
// another version are refused, saying why.
func TestKeyRequestRefusals(t *testing.T) {
	k := newKey(t)
	a := &Agent{log: zap.NewNop()}
	ring := keyring.New(k)
	a.ring.Store(&ring)
	a.keyq = keyQueries{refuseLog: ratelog.New(time.Second), seen: make(map[[membership.QueryIDLen]byte]time.Time)}
	list := func(sent time.Time) []byte {
		b, err := keyring.AppendRequest(nil, keyring.Request{Op: keyring.OpList, Sent: sent})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id := [membership.QueryIDLen]byte{1}
	if ans := a.keyAnswer("n2", id, list(time.Now())); ans.Err != "" || len(ans.Keys) != 1 || !bytes.Equal(ans.Keys[0], k) {
		t.Fatalf("a fresh list: %+v", ans)
	}
	for name, c := range map[string]struct {
		id   byte
		body []byte
		want string
	}{
		"the same id again":   {1, list(time.Now()), "already answered"},
		"sent 2 minutes ago":  {2, list(time.Now().Add(-2 * time.Minute)), "possible replay"},
		"sent 2 minutes on":   {3, list(time.Now().Add(2 * time.Minute)), "possible replay"},
		"another version":     {4, append([]byte{9}, list(time.Now())[1:]...), "request version 9, this agent reads version 1"},
		"a truncated request": {5, list(time.Now())[:4], "too short"},
	} {
		ans := a.keyAnswer("n2", [membership.QueryIDLen]byte{c.id}, c.body)
		if !strings.Contains(ans.Err, c.want) {
			t.Errorf("%s: error %q, want it to say %q", name, ans.Err, c.want)
		}
	}
}
