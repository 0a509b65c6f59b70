package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
)

// The CLI side of voter changes on in-process agents: listing, refusals
// with their reasons (forwarded from a follower), a removal that commits,
// and a protocol without voters.
func TestVotersCommand(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	li, _ := tc.waitLeader(0)
	fi := tc.follower(li)

	// The follower learns that the leader's first configuration committed
	// with the next heartbeat.
	var (
		v              api.Voters
		code           int
		stdout, stderr string
	)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, stdout, stderr = cli(t, "voters", "-json", "-socket", tc.socket(fi))
		v = api.Voters{}
		if code == 0 && json.Unmarshal([]byte(stdout), &v) == nil && v.Index >= 1 {
			break
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || strings.Join(v.Voters, ",") != "n1,n2,n3" || v.Index < 1 {
		t.Fatalf("agent voters -json: exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, "voters", "-socket", tc.socket(fi))
	if code != 0 || !strings.HasPrefix(stdout, "voters n1 n2 n3 (index ") {
		t.Errorf("agent voters: exit %d, %q", code, stdout)
	}

	// Refused by the leader, the reason travels back through the follower.
	code, _, stderr = cli(t, "voters", "-socket", tc.socket(fi), "add", "n9")
	if code != 1 || !strings.Contains(stderr, "409") || !strings.Contains(stderr, `"n9" is not a member`) {
		t.Errorf("add an unknown member: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, "voters", "-socket", tc.socket(fi), "remove", "n7")
	if code != 1 || !strings.Contains(stderr, "409") || !strings.Contains(stderr, "not a voter") {
		t.Errorf("remove a non-voter: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, "voters", "-socket", tc.socket(fi), "add")
	if code != 2 || !strings.Contains(stderr, "'add NAME'") {
		t.Errorf("add without a name: exit %d, stderr %q", code, stderr)
	}

	// A removal commits and the follower's answer shows the new set.
	victim := tc.follower(li)
	name := tc.cfgs[victim].Node.Name
	code, stdout, stderr = cli(t, "voters", "-socket", tc.socket(li), "remove", name)
	if code != 0 || !strings.HasPrefix(stdout, "removed "+name+": voters ") || strings.Contains(stdout, " "+name+" ") {
		t.Fatalf("remove %s on the leader: exit %d, %q, %q", name, code, stdout, stderr)
	}
	// It is no voter any more.
	code, _, stderr = cli(t, "voters", "-socket", tc.socket(li), "remove", name)
	if code != 1 || !strings.Contains(stderr, "not a voter") {
		t.Errorf("remove %s twice: exit %d, %q", name, code, stderr)
	}
}

func TestVotersCommandNeedsMajority(t *testing.T) {
	tc := newTestCluster(t, 1, config.ProtocolBully)
	tc.waitLeader(0)
	code, _, stderr := cli(t, "voters", "-socket", tc.socket(0))
	if code != 1 || !strings.Contains(stderr, "400") || !strings.Contains(stderr, "only majority") {
		t.Errorf("agent voters on bully: exit %d, %q", code, stderr)
	}
}

func TestRecover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n3")
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := protocols.NewConfiguration(4, 6, []string{"n1", "n2", "n3", "n4", "n5"})
	if err := st.Save(protocols.HardState{Term: 7, Vote: 2, Epoch: 7, Config: old}); err != nil {
		t.Fatal(err)
	}

	// Refused while an agent holds the data directory.
	lock, err := store.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "recover", "-data-dir", dir, "-voters", "n3,n4,n5")
	if code != 1 || !strings.Contains(stderr, "in use by another agent") || !strings.Contains(stderr, "stop that agent first") {
		t.Errorf("recover on a locked directory: exit %d, %q", code, stderr)
	}
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	if hs, _ := st.Load(); hs.Term != 7 || hs.Config != old {
		t.Fatalf("a refused recover changed the state: %+v", hs)
	}

	code, stdout, stderr := cli(t, "recover", "-data-dir", dir, "-voters", "n5,n3,n4", "-term", "9")
	if code != 0 || !strings.Contains(stdout, "UNSAFE") || !strings.Contains(stdout, "n1 or n2") || !strings.Contains(stdout, "term and epoch 7 → 9") {
		t.Fatalf("recover: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	st2, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := st2.Load()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := protocols.NewConfiguration(9, 7, []string{"n3", "n4", "n5"})
	if hs.Term != 9 || hs.Epoch != 9 || hs.Vote != protocols.None || hs.Config != want || !hs.ConfigCommitted {
		t.Errorf("recovered state %+v, want term and epoch 9, no vote, %v committed", hs, want)
	}
	// Without -term: one past what it has seen.
	code, stdout, _ = cli(t, "recover", "-data-dir", dir, "-voters", "n3,n4,n5")
	if code != 0 || !strings.Contains(stdout, "term and epoch 9 → 10") {
		t.Errorf("recover again: exit %d, %q", code, stdout)
	}
	if hs, err = st2.Load(); err != nil || hs.Term != 10 {
		t.Fatalf("after the second recover: %+v, %v", hs, err)
	}

	// Bad input changes nothing.
	for _, args := range [][]string{
		{"recover", "-data-dir", dir},
		{"recover", "-data-dir", dir, "-voters", "n1,n1"},
		{"recover", "-data-dir", filepath.Join(dir, "missing"), "-voters", "n1"},
		{"recover", "-voters", "n1"},
	} {
		if code, _, _ := cli(t, args...); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
	if again, _ := st2.Load(); again != hs {
		t.Errorf("bad input changed the state: %+v", again)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("recover created a data directory")
	}
}
