package ring

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// The race seen on real processes (docs/bully-ring.md): the leader 5
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
				nw.Advance(500 * time.Millisecond)
				e1 := nw.Agreed(5)
				nw.Crash(5, false)
				nw.Nodes[3].Suspect(nw.Now, 5, true)
				nw.Deliver()
				if s := nw.Nodes[4].Status(nw.Now); s.Role != protocols.Candidate {
					t.Fatalf("node 4 is %v, want candidate (election message sent to 5)", s.Role)
				}
				for _, id := range []protocols.ID{4, 1, 2} {
					signals[name](nw.Nodes[id], nw.Now)
				}
				nw.Deliver()
				d := nw.TimeToAgree(4, 10*et)
				t.Logf("%s/%s: new leader agreed %v after the crash (election timeout %v)", alg, name, d, et)
				if d >= et/10 {
					t.Errorf("took %v: the stalled-round timer ran although the lost message could be re-sent", d)
				}
				if e2 := nw.Agreed(4); e2 <= e1 {
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
		nw.Advance(500 * time.Millisecond)
		e1 := nw.Agreed(3)
		nw.Crash(3, false)
		nw.Nodes[1].Suspect(nw.Now, 3, true)
		nw.Deliver() // 1 runs; 2 runs too and sends to 3 (lost)
		nw.Crash(1, false)
		nw.Nodes[2].Suspect(nw.Now, 1, true)
		nw.Deliver()
		if s := nw.Nodes[2].Status(nw.Now); s.Role != protocols.Candidate {
			t.Fatalf("%s: node 2 is %v, want candidate", alg, s.Role)
		}
		nw.Nodes[2].Suspect(nw.Now, 3, true)
		nw.Deliver()
		if e2 := nw.Agreed(2); e2 <= e1 {
			t.Fatalf("%s: epoch did not rise: %d -> %d", alg, e1, e2)
		}
	}
}

// Only a message sent within one election timeout before the suspicion is
// re-sent: an older one most likely reached its then-live receiver, so the
// round is left to the stalled-round timer (at least one ElectionTimeout)
// rather than sent round again. In Peterson, 3's stalled-round timer
// starts a new round that 4 joins, 18 ms before the suspicion, and that
// round's messages are re-sent, so only the messages 4 sent at the crash
// are checked.
func TestLostSuccessorOldMessageNotResent(t *testing.T) {
	const et = 100 * time.Millisecond // hb 10ms
	for _, alg := range algs {
		nw := newNetwork(t, seq(5), withAlg(alg))
		nw.Advance(500 * time.Millisecond)
		nw.Crash(5, false)
		start := nw.Now
		nw.TraceSends = true
		nw.TakeEvents()
		nw.Nodes[3].Suspect(nw.Now, 5, true)
		nw.Deliver()
		// What 4 sent to 5 at the crash, less the receiver.
		old := map[string]bool{}
		for _, l := range strings.Split(nw.TakeEvents(), "\n") {
			if _, m, ok := strings.Cut(l, fmt.Sprintf("%v send 4->5 ", start.Sub(0))); ok {
				old[m] = true
			}
		}
		if len(old) == 0 {
			t.Fatalf("%s: node 4 sent nothing to 5 at the crash", alg)
		}
		nw.Advance(et + 20*time.Millisecond)
		nw.TakeEvents()
		for _, id := range []protocols.ID{4, 1, 2} {
			nw.Nodes[id].Suspect(nw.Now, 5, true)
		}
		nw.Deliver()
		for _, l := range strings.Split(nw.TakeEvents(), "\n") {
			if _, m, ok := strings.Cut(l, " send 4->"); ok && old[m[strings.Index(m, " ")+1:]] {
				t.Fatalf("%s: node 4 re-sent %q, sent to 5 %v before the suspicion", alg, l, nw.Now.Sub(start))
			}
		}
		if s := nw.Nodes[4].Status(nw.Now); alg != AlgPeterson && s.Role != protocols.Candidate {
			t.Fatalf("%s: node 4 is %v right after the late suspicion, want candidate", alg, s.Role)
		}
		nw.TimeToAgree(4, 10*et)
		if d := nw.Now.Sub(start); d < et {
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
		nw.Advance(500 * time.Millisecond)
		nw.Crash(5, false)
		nw.Nodes[3].Suspect(nw.Now, 5, true)
		nw.Deliver()
		nw.Advance(60 * time.Millisecond) // hb 10ms < 60ms < et 100ms
		for _, id := range []protocols.ID{4, 1, 2} {
			nw.Nodes[id].Suspect(nw.Now, 5, true)
		}
		nw.Deliver()
		if !nw.AgreesOn(4) {
			t.Fatalf("%s: no agreement on 4 right after the suspicion: the message sent 60 ms before was not re-sent", alg)
		}
	}
}
