package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

func TestLeader(t *testing.T) {
	_, sock := startSingle(t)
	st := statusAt(t, sock)

	code, stdout, stderr := cli(t, "leader", "-socket", sock)
	if want := fmt.Sprintf("n1 epoch %d (this node)\n", st.Epoch); code != 0 || stdout != want || stderr != "" {
		t.Errorf("agent leader: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}

	code, stdout, stderr = cli(t, "leader", "-json", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent leader -json: exit %d, stderr %q", code, stderr)
	}
	if got, want := jsonKeys(t, stdout), []string{"epoch", "is_self", "leader"}; !slices.Equal(got, want) {
		t.Errorf("agent leader -json keys %q, want %q", got, want)
	}
	var l api.Leader
	if err := json.Unmarshal([]byte(stdout), &l); err != nil {
		t.Fatal(err)
	}
	if want := (api.Leader{Leader: "n1", Epoch: st.Epoch, IsSelf: true}); l != want {
		t.Errorf("agent leader -json: %+v, want %+v", l, want)
	}

	// -wait with nothing changing: the wait ends and the answer is the
	// unchanged leader, not an error.
	code, stdout, stderr = cli(t, "leader", "-wait", "100ms", "-socket", sock)
	if want := fmt.Sprintf("n1 epoch %d (this node)\n", st.Epoch); code != 0 || stdout != want {
		t.Errorf("agent leader -wait 100ms with no change: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
}

// leader -wait blocks until the epoch passes -index; a resign in a
// three-node cluster moves it.
func TestLeaderWaitBlocksUntilEpochChanges(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	li, first := tc.waitLeader(0)
	fi := tc.follower(li)

	done := goCLI("leader", "-json", "-wait", "30s", "-index", fmt.Sprint(first.Epoch), "-socket", tc.socket(fi))
	select {
	case r := <-done:
		t.Fatalf("agent leader -wait returned with no epoch change: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}

	if code, _, stderr := cli(t, "resign", "-socket", tc.socket(li)); code != 0 {
		t.Fatalf("agent resign on the leader: exit %d, %s", code, stderr)
	}
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("agent leader -wait still blocked 20s after a resign")
	}
	var l api.Leader
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
		t.Fatalf("agent leader -wait: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if l.Epoch <= first.Epoch {
		t.Errorf("agent leader -wait answered epoch %d, want above %d", l.Epoch, first.Epoch)
	}
	if l.IsSelf && l.Leader != tc.cfgs[fi].Node.Name {
		t.Errorf("agent leader -wait on n%d: %+v", fi+1, l)
	}
	li, second := tc.waitLeader(first.Epoch)

	// Without -index, -wait waits for a change of the epoch it finds. The
	// test cannot tell when the command has read it, so it resigns until
	// the command answers.
	done = goCLI("leader", "-json", "-wait", "30s", "-socket", tc.socket(tc.follower(li)))
	for round := 0; ; round++ {
		if round == 5 {
			t.Fatal("agent leader -wait without -index did not answer after 5 resigns")
		}
		if code, _, stderr := cli(t, "resign", "-socket", tc.socket(li)); code != 0 {
			t.Fatalf("agent resign on the leader: exit %d, %s", code, stderr)
		}
		var r cliResult
		select {
		case r = <-done:
		case <-time.After(3 * time.Second):
			li, _ = tc.waitLeader(second.Epoch)
			continue
		}
		var l api.Leader
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || l.Epoch <= second.Epoch {
			t.Fatalf("agent leader -wait without -index: exit %d, stdout %q, stderr %q; want an epoch above %d", r.code, r.stdout, r.stderr, second.Epoch)
		}
		break
	}
}

// TestLeaderWaitNeedsKnownLeader: -wait answers only with a known leader in
// a newer epoch. A lone voter of three, without PreVote, starts election
// after election (each a new epoch) and wins none; the command must keep
// waiting through them and answer once a second voter lets one succeed.
// (It used to answer "(none) epoch E+1" at the first campaign.)
func TestLeaderWaitNeedsKnownLeader(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	tc.waitLeader(0)
	for i := range tc.agents {
		tc.stop(i, true)
		tc.cfgs[i].Election.PreVote = false
	}
	tc.start(0)
	index := statusAt(t, tc.socket(0)).Epoch
	done := goCLI("leader", "-json", "-wait", "60s", "-index", fmt.Sprint(index), "-socket", tc.socket(0))
	eventually(t, 20*time.Second, "two leaderless elections on n1", func() bool {
		st := statusAt(t, tc.socket(0))
		return st.Epoch >= index+2 && st.Leader == ""
	})
	select {
	case r := <-done:
		t.Fatalf("agent leader -wait answered while no one led: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	default:
	}
	tc.start(1)
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("agent leader -wait still blocked 30s after a second voter started")
	}
	var l api.Leader
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
		t.Fatalf("agent leader -wait: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if l.Leader == "" || l.Epoch <= index {
		t.Errorf("agent leader -wait answered %+v; want a leader in an epoch above %d", l, index)
	}
}
