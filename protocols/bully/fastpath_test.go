package bully

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// agreesOn reports whether every live node names want as leader in one
// epoch and want alone reports itself leader.
func (nw *network) agreesOn(want protocols.ID) bool {
	var epoch uint64
	for _, id := range nw.ids {
		if nw.crashd[id] {
			continue
		}
		s := nw.nodes[id].Status(nw.now)
		if s.Leader != want || (epoch != 0 && s.Epoch != epoch) {
			return false
		}
		epoch = s.Epoch
	}
	l := nw.leaders()
	return len(l) == 1 && l[0] == want
}

// timeToAgree advances virtual time one tick at a time until every live node
// agrees on want, and returns how long that took; it fails after limit.
func (nw *network) timeToAgree(want protocols.ID, limit time.Duration) time.Duration {
	nw.t.Helper()
	start := nw.now
	for !nw.agreesOn(want) {
		if nw.now.Sub(start) >= limit {
			nw.t.Fatalf("no agreement on %d after %v", want, limit)
		}
		nw.advance(time.Millisecond)
	}
	return nw.now.Sub(start)
}

// The race measured on real processes (docs/measurements.md): the leader 5
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
		{"suspect", func(nw *network) { nw.nodes[4].Suspect(nw.now, 5, true) }, true},
		{"member-down", func(nw *network) { nw.nodes[4].MemberDown(nw.now, 5) }, true},
		{"no-signal", func(*network) {}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nw := newNetwork(t, seq(5), nil)
			nw.advance(200 * time.Millisecond)
			e1 := nw.agreed(5)
			nw.crash(5, false)
			nw.nodes[3].Suspect(nw.now, 5, true)
			nw.deliver()
			if s := nw.nodes[4].Status(nw.now); s.Role != protocols.Candidate {
				t.Fatalf("node 4 is %v, want candidate (ELECTION sent to 5)", s.Role)
			}
			tc.signal(nw)
			nw.deliver()
			d := nw.timeToAgree(4, 10*et)
			t.Logf("%s: new leader agreed %v after the crash (election timeout %v)", tc.name, d, et)
			if tc.fast && d >= et/10 {
				t.Errorf("took %v: the OK wait ran although no higher id was left", d)
			}
			if !tc.fast && d < et {
				t.Errorf("took %v without any signal: less than the OK wait %v", d, et)
			}
			if e2 := nw.agreed(4); e2 <= e1 {
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
			nw.advance(200 * time.Millisecond)
			nw.agreed(5)
			nw.crash(5, false)
			nw.nodes[3].Suspect(nw.now, 5, true)
			nw.deliver() // 3 -> ELECTION -> 4, 4 -> OK -> 3, 4 -> ELECTION -> 5 (lost)
			nw.crash(4, false)
			if s := nw.nodes[3].Status(nw.now); s.Role != protocols.Candidate {
				t.Fatalf("node 3 is %v, want candidate awaiting the COORDINATOR", s.Role)
			}
			if signal == "suspect" {
				nw.nodes[3].Suspect(nw.now, 4, true)
				nw.deliver()
			}
			d := nw.timeToAgree(3, 10*et)
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
	nw.advance(200 * time.Millisecond)
	nw.agreed(6)
	nw.crash(6, false)
	nw.crash(5, false)
	nw.nodes[4].Suspect(nw.now, 6, true)
	nw.deliver() // 4 -> ELECTION -> 5, 6 (both lost)
	nw.nodes[4].Suspect(nw.now, 6, false)
	nw.nodes[4].Suspect(nw.now, 5, true)
	nw.deliver()
	if s := nw.nodes[4].Status(nw.now); s.Role != protocols.Candidate {
		t.Fatalf("node 4 is %v with 6 still believed alive, want candidate", s.Role)
	}
	nw.nodes[4].Suspect(nw.now, 6, true)
	nw.deliver()
	if s := nw.nodes[4].Status(nw.now); s.Role != protocols.Leader {
		t.Fatalf("node 4 is %v with every higher id suspected, want leader", s.Role)
	}
}
