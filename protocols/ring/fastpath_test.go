package ring

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
// dies, node 3 suspects it first and its election message makes 4 run and
// send its own ELECT (LCR) or clockwise probe (HS) to 5, which is dead; the
// other survivors' detectors fire right after. The message lost to 5 must be
// sent again at once to the next live successor rather than wait for the
// stalled-round timer (at least one ElectionTimeout).
func TestLostSuccessorResend(t *testing.T) {
	const et = 100 * time.Millisecond // the test network's ElectionTimeout
	signals := map[string]func(n *Node, now protocols.Time){
		"suspect":     func(n *Node, now protocols.Time) { n.Suspect(now, 5, true) },
		"member-down": func(n *Node, now protocols.Time) { n.MemberDown(now, 5) },
	}
	for _, alg := range algs {
		for _, name := range []string{"suspect", "member-down"} {
			t.Run(alg+"/"+name, func(t *testing.T) {
				nw := newNetwork(t, seq(5), withAlg(alg))
				nw.advance(500 * time.Millisecond)
				e1 := nw.agreed(5)
				nw.crash(5, false)
				nw.nodes[3].Suspect(nw.now, 5, true)
				nw.deliver()
				if s := nw.nodes[4].Status(nw.now); s.Role != protocols.Candidate {
					t.Fatalf("node 4 is %v, want candidate (election message sent to 5)", s.Role)
				}
				for _, id := range []protocols.ID{4, 1, 2} {
					signals[name](nw.nodes[id], nw.now)
				}
				nw.deliver()
				d := nw.timeToAgree(4, 10*et)
				t.Logf("%s/%s: new leader agreed %v after the crash (election timeout %v)", alg, name, d, et)
				if d >= et/10 {
					t.Errorf("took %v: the stalled-round timer ran although the lost message could be re-sent", d)
				}
				if e2 := nw.agreed(4); e2 <= e1 {
					t.Fatalf("epoch did not rise: %d -> %d", e1, e2)
				}
			})
		}
	}
}

// When the lost successor was the last other live member, nobody is left to
// re-send to: the node wins at once instead of waiting for its round to
// stall.
func TestLostSuccessorAloneWins(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(3), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		e1 := nw.agreed(3)
		nw.crash(3, false)
		nw.nodes[1].Suspect(nw.now, 3, true)
		nw.deliver() // 1 runs; 2 runs too and sends to 3 (lost)
		nw.crash(1, false)
		nw.nodes[2].Suspect(nw.now, 1, true)
		nw.deliver()
		if s := nw.nodes[2].Status(nw.now); s.Role != protocols.Candidate {
			t.Fatalf("%s: node 2 is %v, want candidate", alg, s.Role)
		}
		nw.nodes[2].Suspect(nw.now, 3, true)
		nw.deliver()
		if e2 := nw.agreed(2); e2 <= e1 {
			t.Fatalf("%s: epoch did not rise: %d -> %d", alg, e1, e2)
		}
	}
}

// Only a message sent within one election timeout before the suspicion is
// re-sent: an older one most likely reached its then-live receiver, so the
// round is left to the stalled-round timer (at least one ElectionTimeout)
// rather than sent round again.
func TestLostSuccessorOldMessageNotResent(t *testing.T) {
	const et = 100 * time.Millisecond // hb 10ms
	for _, alg := range algs {
		nw := newNetwork(t, seq(5), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		nw.crash(5, false)
		start := nw.now
		nw.nodes[3].Suspect(nw.now, 5, true)
		nw.deliver()
		nw.advance(et + 20*time.Millisecond)
		for _, id := range []protocols.ID{4, 1, 2} {
			nw.nodes[id].Suspect(nw.now, 5, true)
		}
		nw.deliver()
		if s := nw.nodes[4].Status(nw.now); s.Role != protocols.Candidate {
			t.Fatalf("%s: node 4 is %v right after the late suspicion, want candidate", alg, s.Role)
		}
		nw.timeToAgree(4, 10*et)
		if d := nw.now.Sub(start); d < et {
			t.Fatalf("%s: agreed %v after the crash, before any round could stall", alg, d)
		}
	}
}

// A message sent longer than a heartbeat interval but within one election
// timeout before the suspicion is re-sent: the agent's detector suspects a
// member well after the node's own silent-leader timer may have started a
// round towards it, and without the re-send failover waits for the
// stalled-round timer.
func TestLostSuccessorResentWithinElectionTimeout(t *testing.T) {
	for _, alg := range algs {
		nw := newNetwork(t, seq(5), withAlg(alg))
		nw.advance(500 * time.Millisecond)
		nw.crash(5, false)
		nw.nodes[3].Suspect(nw.now, 5, true)
		nw.deliver()
		nw.advance(60 * time.Millisecond) // hb 10ms < 60ms < et 100ms
		for _, id := range []protocols.ID{4, 1, 2} {
			nw.nodes[id].Suspect(nw.now, 5, true)
		}
		nw.deliver()
		if !nw.agreesOn(4) {
			t.Fatalf("%s: no agreement on 4 right after the suspicion: the message sent 60 ms before was not re-sent", alg)
		}
	}
}
