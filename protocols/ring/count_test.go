package ring

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

var sizes = []int{4, 8, 16, 32, 64}

func harmonic(n int) float64 {
	h := 0.0
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	return h
}

// descending is the clockwise order n, n-1, …, 1.
func descending(n int) []protocols.ID {
	ids := seq(n)
	slices.Reverse(ids)
	return ids
}

// runAll starts every node at once on a ring in the given clockwise order
// and returns the message counts of the whole election.
func runAll(t *testing.T, n int, alg string, order []protocols.ID) map[protocols.MessageKind]int {
	t.Helper()
	nw := newNetwork(t, seq(n), func(c *Config) { c.Algorithm = alg })
	if order != nil {
		nw.setOrder(order)
	}
	for _, id := range nw.IDs {
		nw.Nodes[id].Campaign(nw.Now)
	}
	nw.Deliver()
	nw.Agreed(protocols.ID(n))
	return nw.Delivered
}

// LCR's worst case: ids decreasing along the direction of travel (clockwise
// here), every node starting at once. The message of the k-th highest id
// travels k hops: n(n+1)/2 ELECT messages, then n LEADER.
func TestLCRWorstCase(t *testing.T) {
	for _, n := range sizes {
		c := runAll(t, n, AlgLCR, descending(n))
		t.Logf("LCR worst n=%d: elect=%d leader=%d (n(n+1)/2=%d)", n, c[protocols.MsgRingElect], c[protocols.MsgRingLeader], n*(n+1)/2)
		if c[protocols.MsgRingElect] != n*(n+1)/2 || c[protocols.MsgRingLeader] != n {
			t.Errorf("n=%d: %v, want %d elect and %d leader", n, c, n*(n+1)/2, n)
		}
	}
}

// Our production ring is ordered by id, which is LCR's best case: every id
// but the highest is swallowed after one hop, 2n-1 ELECT messages.
func TestLCRIdOrder(t *testing.T) {
	for _, n := range sizes {
		c := runAll(t, n, AlgLCR, nil)
		t.Logf("LCR id order n=%d: elect=%d leader=%d", n, c[protocols.MsgRingElect], c[protocols.MsgRingLeader])
		if c[protocols.MsgRingElect] != 2*n-1 || c[protocols.MsgRingLeader] != n {
			t.Errorf("n=%d: %v, want %d elect and %d leader", n, c, 2*n-1, n)
		}
	}
}

// Over random arrangements, Chang and Roberts' average is n·H(n) ELECT
// messages. Arrangements are random permutations of the ids around the
// ring (the test-only order override), 200 per size from a fixed seed.
func TestLCRAverage(t *testing.T) {
	const trials = 200
	rng := rand.New(rand.NewPCG(42, 42))
	for _, n := range sizes {
		total := 0
		for range trials {
			order := seq(n)
			rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
			total += runAll(t, n, AlgLCR, order)[protocols.MsgRingElect]
		}
		avg := float64(total) / trials
		want := float64(n) * harmonic(n)
		t.Logf("LCR random n=%d: mean elect=%.1f n·H(n)=%.1f ratio=%.3f", n, avg, want, avg/want)
		if math.Abs(avg/want-1) > 0.1 {
			t.Errorf("n=%d: mean %.1f is not close to n·H(n)=%.1f", n, avg, want)
		}
	}
}

// Hirschberg-Sinclair stays within 8n(1+⌈log2 n⌉) probe and reply messages,
// in id order and over random arrangements.
func TestHSBound(t *testing.T) {
	const trials = 200
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range sizes {
		bound := 8 * n * (1 + bits.Len(uint(n-1)))
		hsMsgs := func(c map[protocols.MessageKind]int) int { return c[protocols.MsgHSProbe] + c[protocols.MsgHSReply] }
		c := runAll(t, n, AlgHS, nil)
		sorted := hsMsgs(c)
		if c[protocols.MsgRingLeader] != n {
			t.Errorf("n=%d: %d leader messages", n, c[protocols.MsgRingLeader])
		}
		worst, total := 0, 0
		for range trials {
			order := seq(n)
			rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
			m := hsMsgs(runAll(t, n, AlgHS, order))
			worst = max(worst, m)
			total += m
		}
		rev := hsMsgs(runAll(t, n, AlgHS, descending(n)))
		t.Logf("HS n=%d: id order=%d descending=%d random mean=%.1f max=%d bound 8n(1+⌈log2 n⌉)=%d",
			n, sorted, rev, float64(total)/trials, worst, bound)
		if max(sorted, rev, worst) > bound {
			t.Errorf("n=%d: %d messages exceed %d", n, max(sorted, rev, worst), bound)
		}
	}
}
