package bully

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// TestDeadSeedBeforeAnyElection: the seed, n1, dies before any election,
// so it never heartbeated anyone and no detector suspects it, and the
// others started less than the preempt delay ago. Each of them waits for
// a leader while a member below it is live (waitsForLeader), and n1 looks
// live until gossip declares it dead. Told that the transport does not
// reach n1, n2 no longer waits for it and starts the election, which n4
// wins; before, nobody led until the preempt delay ran out.
func TestDeadSeedBeforeAnyElection(t *testing.T) {
	for _, told := range []bool{false, true} {
		nw := newNetwork(t, seq(4), func(c *Config) { c.PreemptDelay = 5 * time.Second })
		nw.Crash(1, false)
		if told {
			for id := protocols.ID(2); id <= 4; id++ {
				nw.Nodes[id].SetUnreached(nw.Now, 1, true)
			}
		}
		// Ten election timeouts: far less than the 5 s delay.
		nw.Advance(time.Second)
		for id := protocols.ID(2); id <= 4; id++ {
			st := nw.Nodes[id].Status(nw.Now)
			switch {
			case told && st.Leader != 4:
				t.Fatalf("told n1 is not reached: n%d follows %d, want n4", id, st.Leader)
			case !told && st.Leader != protocols.None:
				t.Fatalf("not told: n%d follows %d a second after the start, want no leader yet (the 5 s delay)", id, st.Leader)
			}
		}
	}
}

// TestUnreachedOnlyWhereNoOneBelowIsReached: a node waits while any
// member below it is reached; a mark is undone by SetUnreached(false).
func TestUnreachedOnlyWhereNoOneBelowIsReached(t *testing.T) {
	nw := newNetwork(t, seq(3), func(c *Config) { c.PreemptDelay = 5 * time.Second })
	nw.Crash(1, false)
	nw.Crash(2, false)
	n3 := nw.Nodes[3]
	n3.SetUnreached(nw.Now, 1, true)
	nw.Advance(time.Second)
	if l := n3.Status(nw.Now).Leader; l != protocols.None {
		t.Fatalf("n3 leads or follows %d while n2, below it, is reached", l)
	}
	n3.SetUnreached(nw.Now, 2, true)
	n3.SetUnreached(nw.Now, 1, false)
	nw.Advance(time.Second)
	if l := n3.Status(nw.Now).Leader; l != protocols.None {
		t.Fatalf("n3 leads or follows %d while n1, below it, is reached again", l)
	}
	n3.SetUnreached(nw.Now, 1, true)
	nw.Advance(time.Second)
	if l := n3.Status(nw.Now).Leader; l != 3 {
		t.Fatalf("n3 follows %d with nobody below it reached, want itself", l)
	}
}
