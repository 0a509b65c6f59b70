package main

import (
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/config"
)

func TestResign(t *testing.T) {
	tc := newTestCluster(t, 3, config.ProtocolMajority)
	li, first := tc.waitLeader(0)
	fi := tc.follower(li)

	// On a follower: refused, with the reason.
	code, stdout, stderr := cli(t, "resign", "-socket", tc.socket(fi))
	if code != 1 || stdout != "" || !strings.Contains(stderr, "409") || !strings.Contains(stderr, "not the leader") {
		t.Errorf("agent resign on a follower: exit %d, stdout %q, stderr %q; want exit 1 and a 409 saying not the leader", code, stdout, stderr)
	}
	if _, st := tc.waitLeader(0); st.Epoch != first.Epoch || st.Node != first.Node {
		t.Errorf("a refused resign changed the leadership: %+v, was %+v", st, first)
	}

	// On the leader: accepted, and leadership moves on.
	code, stdout, stderr = cli(t, "resign", "-socket", tc.socket(li))
	if code != 0 || stdout != "resigned: leadership is being handed over\n" || stderr != "" {
		t.Fatalf("agent resign on the leader: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	li2, second := tc.waitLeader(first.Epoch)
	if li2 == li {
		t.Errorf("after resign, %s still leads (epoch %d → %d)", second.Node, first.Epoch, second.Epoch)
	}

	code, stdout, stderr = cli(t, "resign", "-json", "-socket", tc.socket(li2))
	if code != 0 || strings.TrimSpace(stdout) != "{\n  \"resigned\": true\n}" {
		t.Errorf("agent resign -json on the leader: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	tc.waitLeader(second.Epoch)
}
