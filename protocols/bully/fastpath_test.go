package bully

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The race seen on real processes (docs/bully-ring.md): the leader 5
// dies, node 3 suspects it first and its ELECTION makes 4 send its own
// ELECTION to 5, which is dead; 4's detector fires right after. With nobody
// higher left unsuspected, 4 must not sit out the OK wait (one
// ElectionTimeout): it becomes coordinator at once. Without the signal it
// still does, after the timeout.
func TestLostHigherSkipsOKWait(t *testing.T) {
	const et = 100 * time.Millisecond // the test network's ElectionTimeout
	cases := []struct {
		name   string
		signal func(nw *network)
		fast   bool
	}{
		{"suspect", func(nw *network) { nw.Nodes[4].Suspect(nw.Now, 5, true) }, true},
		{"member-down", func(nw *network) { nw.Nodes[4].MemberDown(nw.Now, 5) }, true},
		{"no-signal", func(*network) {}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nw := newNetwork(t, seq(5), nil)
			nw.Advance(200 * time.Millisecond)
			e1 := nw.Agreed(5)
			nw.Crash(5, false)
			nw.Nodes[3].Suspect(nw.Now, 5, true)
			nw.Deliver()
			if s := nw.Nodes[4].Status(nw.Now); s.Role != protocols.Candidate {
				t.Fatalf("node 4 is %v, want candidate (ELECTION sent to 5)", s.Role)
			}
			tc.signal(nw)
			nw.Deliver()
			d := nw.TimeToAgree(4, 10*et)
			t.Logf("%s: new leader agreed %v after the crash (election timeout %v)", tc.name, d, et)
			if tc.fast && d >= et/10 {
				t.Errorf("took %v: the OK wait ran although no higher id was left", d)
			}
			if !tc.fast && d < et {
				t.Errorf("took %v without any signal: less than the OK wait %v", d, et)
			}
			if e2 := nw.Agreed(4); e2 <= e1 {
				t.Fatalf("epoch did not rise: %d -> %d", e1, e2)
			}
		})
	}
}

// A candidate that got an OK waits two election timeouts for the
// COORDINATOR. When the node that sent the OK dies before announcing itself
// and no higher id is left unsuspected, the wait is pointless: the candidate
// runs its election again at once and, alone at the top, wins.
func TestLostHigherSkipsCoordinatorWait(t *testing.T) {
	const et = 100 * time.Millisecond
	for _, signal := range []string{"suspect", "none"} {
		t.Run(signal, func(t *testing.T) {
			nw := newNetwork(t, seq(5), nil)
			nw.Advance(200 * time.Millisecond)
			nw.Agreed(5)
			nw.Crash(5, false)
			nw.Nodes[3].Suspect(nw.Now, 5, true)
			nw.Deliver() // 3 -> ELECTION -> 4, 4 -> OK -> 3, 4 -> ELECTION -> 5 (lost)
			nw.Crash(4, false)
			if s := nw.Nodes[3].Status(nw.Now); s.Role != protocols.Candidate {
				t.Fatalf("node 3 is %v, want candidate awaiting the COORDINATOR", s.Role)
			}
			if signal == "suspect" {
				nw.Nodes[3].Suspect(nw.Now, 4, true)
				nw.Deliver()
			}
			d := nw.TimeToAgree(3, 10*et)
			t.Logf("%s: node 3 agreed as leader %v after 4 died", signal, d)
			if signal == "suspect" && d >= et/10 {
				t.Errorf("took %v: the COORDINATOR wait ran although no higher id was left", d)
			}
			if signal == "none" && d < 2*et {
				t.Errorf("took %v without any signal: less than the COORDINATOR wait %v", d, 2*et)
			}
		})
	}
}

// A lost higher id does not cut the wait short while another higher id is
// still believed alive: that one may answer.
func TestLostHigherKeepsWaitingForOthers(t *testing.T) {
	nw := newNetwork(t, seq(6), nil)
	nw.Advance(200 * time.Millisecond)
	nw.Agreed(6)
	nw.Crash(6, false)
	nw.Crash(5, false)
	nw.Nodes[4].Suspect(nw.Now, 6, true)
	nw.Deliver() // 4 -> ELECTION -> 5, 6 (both lost)
	nw.Nodes[4].Suspect(nw.Now, 6, false)
	nw.Nodes[4].Suspect(nw.Now, 5, true)
	nw.Deliver()
	if s := nw.Nodes[4].Status(nw.Now); s.Role != protocols.Candidate {
		t.Fatalf("node 4 is %v with 6 still believed alive, want candidate", s.Role)
	}
	nw.Nodes[4].Suspect(nw.Now, 6, true)
	nw.Deliver()
	if s := nw.Nodes[4].Status(nw.Now); s.Role != protocols.Leader {
		t.Fatalf("node 4 is %v with every higher id suspected, want leader", s.Role)
	}
}
