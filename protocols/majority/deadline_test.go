package majority

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// TestNextDeadlineSkipsOnlyIdleTicks runs the same randomised fault
// schedule twice: once ticking every node every testTick, once ticking a
// node only when its NextDeadline is due (how the agent sleeps). Every
// message, role change and lease must match: a tick the deadline let us
// skip must have been one that would have done nothing.
func TestNextDeadlineSkipsOnlyIdleTicks(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		eager := deadlineScenario(seed, false)
		lazy := deadlineScenario(seed, true)
		if eager != lazy {
			t.Fatalf("seed %d: ticking only at NextDeadline changed the run\n--- every tick:\n%s\n--- at deadlines:\n%s", seed, eager, lazy)
		}
	}
}

// deadlineScenario elects a leader in a 5-voter cluster and then applies
// random faults: isolation, heal, crash, restart, resign, suspicion. It
// returns the trace of every message and state change.
func deadlineScenario(seed uint64, lazy bool) string {
	cfg := baseConfig()
	cfg.ElectionTimeout, cfg.HeartbeatInterval = 200*time.Millisecond, 50*time.Millisecond
	tn := newTestNet(5, 1, seed, cfg)
	tn.TraceSends, tn.Lazy = true, lazy
	rng := rand.New(rand.NewPCG(seed, 99))
	tn.runUntilLeader(10 * time.Second)
	for range 30 {
		switch rng.IntN(7) {
		case 0:
			if l := tn.leader(); l != protocols.None {
				tn.Isolate(l)
			}
		case 1:
			tn.Heal()
		case 2:
			ids := tn.Live()
			if len(ids) > 3 {
				tn.crash(ids[rng.IntN(len(ids))])
			}
		case 3:
			for _, m := range tn.members {
				if _, up := tn.Nodes[m.ID]; !up {
					tn.start(m.ID)
					break
				}
			}
		case 4:
			if l := tn.leader(); l != protocols.None {
				_ = tn.Nodes[l].Resign(tn.Now)
				tn.Drain(l)
			}
		case 5:
			if l := tn.leader(); l != protocols.None {
				for _, id := range tn.Live() {
					if id != l {
						tn.Nodes[id].Suspect(tn.Now, l, true)
						tn.Drain(id)
					}
				}
			}
		}
		tn.Deliver()
		tn.Advance(time.Duration(1+rng.IntN(60)) * testTick)
	}
	tn.Heal()
	tn.Advance(3 * time.Second)
	return tn.TakeEvents() + tn.Status()
}

// TestNextDeadlineIsNeverStaleAfterTick checks that a node ticked at time
// now re-arms into the future (or disarms), so a driver that sleeps until
// the deadline cannot spin.
func TestNextDeadlineIsNeverStaleAfterTick(t *testing.T) {
	cfg := baseConfig()
	cfg.ElectionTimeout, cfg.HeartbeatInterval = 200*time.Millisecond, 50*time.Millisecond
	tn := newTestNet(3, 1, 7, cfg)
	armed := 0
	for step := 0; step < 2000; step++ {
		switch step {
		case 500:
			if l := tn.leader(); l != protocols.None {
				tn.Isolate(l)
			}
		case 900:
			tn.Heal()
		}
		tn.Advance(testTick)
		for _, id := range tn.Live() {
			n := tn.Nodes[id]
			n.Tick(tn.Now)
			tn.Drain(id)
			d, ok := n.NextDeadline(tn.Now)
			if ok && d <= tn.Now {
				t.Fatalf("step %d n%d: deadline %v still due after Tick at %v", step, id, d.Sub(0), tn.Now.Sub(0))
			}
			if ok {
				armed++
			}
		}
		tn.Deliver()
	}
	if armed == 0 {
		t.Fatal("no deadline was ever armed: the check checked nothing")
	}
}

// TestQuorumCheckRidesTheHeartbeat: an idle leader's only deadline is its
// next heartbeat (the quorum check waits for it, so the driver never wakes
// between heartbeats for it), and a leader cut off from every follower
// still steps down within two election timeouts and a heartbeat interval
// of being cut off (a check that just passed on the last answers, then
// the next, a heartbeat late at most).
func TestQuorumCheckRidesTheHeartbeat(t *testing.T) {
	cfg := baseConfig()
	cfg.ElectionTimeout, cfg.HeartbeatInterval = 200*time.Millisecond, 50*time.Millisecond
	tn := newTestNet(3, 0, 11, cfg)
	tn.Lazy = true
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	tn.Advance(time.Second)
	var stepDown time.Duration
	// Drive the leader as the agent does: wake at its deadline, a little
	// late as a real timer is, tick, and deliver. Its heartbeats re-arm
	// from each late wake, so a quorum check re-armed every election
	// timeout drifts away from them.
	rng := rand.New(rand.NewPCG(11, 3))
	for range 200 {
		n := tn.Nodes[l]
		d, ok := n.NextDeadline(tn.Now)
		if !ok || d != n.heartbeatDue {
			t.Fatalf("at %v the idle leader's deadline is %v (armed %v), not its next heartbeat %v", tn.Now.Sub(0), d.Sub(0), ok, n.heartbeatDue.Sub(0))
		}
		tn.Now = d.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
		n.Tick(tn.Now)
		tn.Deliver()
		if n.state != stateLeader {
			t.Fatalf("n%d lost its leadership while idle", l)
		}
	}
	tn.Now = tn.Now.Add(testTick - tn.Now.Sub(0)%testTick) // back on the tick grid
	cut := tn.Now
	tn.Isolate(l)
	for tn.Nodes[l].state == stateLeader {
		stepDown = tn.Now.Sub(cut)
		if tn.Now.Sub(cut) > 2*cfg.ElectionTimeout+cfg.HeartbeatInterval+2*testTick {
			t.Fatalf("n%d still leads %v after being cut off", l, tn.Now.Sub(cut))
		}
		tn.Advance(testTick)
	}
	t.Logf("the cut-off leader stepped down %v after the cut", stepDown)
}
