package ring

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/internal/racetest"
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

// petersonWorst is a clockwise arrangement of 1…n, n a power of two, in
// which every Peterson phase halves the active nodes exactly, so that the
// election takes the most phases, ⌊log₂ n⌋ + 1: high and low values
// alternate, and the high ones, which the nodes after them adopt, are
// themselves in the worst arrangement of n/2.
func petersonWorst(n int) []protocols.ID {
	if n == 1 {
		return []protocols.ID{1}
	}
	half := petersonWorst(n / 2)
	out := make([]protocols.ID, 0, n)
	for i, v := range half {
		out = append(out, v+protocols.ID(n/2), protocols.ID(i+1))
	}
	return out
}

// petersonMsgs counts a Peterson election's messages: FIRST, SECOND,
// WINNER and the n LEADER messages.
func petersonMsgs(c map[protocols.MessageKind]int) int {
	return c[protocols.MsgPetersonFirst] + c[protocols.MsgPetersonSecond] + c[protocols.MsgPetersonWinner] + c[protocols.MsgRingLeader]
}

// petersonBound is the bound the tests hold Peterson to, LEADER messages
// included: at most ⌊log₂ n⌋ phases of 2n messages while two or more
// nodes are active, n in the last phase, at most n−1 for WINNER and n for
// LEADER.
func petersonBound(n int) int { return 2*n*(bits.Len(uint(n))-1) + 3*n }

// lcrMsgs and hsMsgs count an LCR or HS election's messages, the n
// LEADER messages included.
func lcrMsgs(c map[protocols.MessageKind]int) int {
	return c[protocols.MsgRingElect] + c[protocols.MsgRingLeader]
}
func hsMsgs(c map[protocols.MessageKind]int) int {
	return c[protocols.MsgHSProbe] + c[protocols.MsgHSReply] + c[protocols.MsgRingLeader]
}

// TestMessageCountTable measures the three algorithms side by side, every
// node starting at once, for n = 8, 64 and 512: worst is LCR's descending
// arrangement, Peterson's petersonWorst and, for HS, the most any tried
// arrangement took (id order, descending, the random ones); avg is the
// mean over the same random arrangements for all three. It holds Peterson
// to 2n⌊log₂ n⌋ + 3n, worst and average, with exactly 2n⌊log₂ n⌋ + n
// FIRST and SECOND messages in its worst arrangement and 5n − 1 messages
// in id order, LCR to n(n+1)/2 + n
// and HS to 8n(1+⌈log₂ n⌉) + n, and logs the table docs/bully-ring.md
// shows (go test -count=1 -run TestMessageCountTable -v ./protocols/ring).
func TestMessageCountTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	rows := []string{"| n | LCR worst / avg | HS worst / avg | Peterson worst / avg | 2n⌊log₂ n⌋ + 3n | random arrangements |", "|---|---|---|---|---|---|"}
	for _, n := range []int{8, 64, 512} {
		trials := 100
		if n > 64 {
			if testing.Short() || racetest.Enabled {
				// Some 20 s of CPU, ten times that under the race
				// detector: scripts/test runs it without.
				break
			}
			trials = 10
		}
		logn := bits.Len(uint(n)) - 1
		pc := runAll(t, n, AlgPeterson, petersonWorst(n))
		if got, want := pc[protocols.MsgPetersonFirst]+pc[protocols.MsgPetersonSecond], 2*n*logn+n; got != want {
			t.Errorf("n=%d Peterson worst arrangement: %d FIRST+SECOND, want 2n⌊log₂ n⌋+n = %d", n, got, want)
		}
		pWorst := petersonMsgs(pc)
		// In id order (production) only the lowest id, after the highest,
		// stays active: 2n, then its FIRST round the ring, then WINNER
		// n−1 hops up to the highest, then LEADER.
		if got := petersonMsgs(runAll(t, n, AlgPeterson, nil)); got != 5*n-1 {
			t.Errorf("n=%d Peterson in id order: %d messages, want 5n−1 = %d", n, got, 5*n-1)
		}
		lWorst := lcrMsgs(runAll(t, n, AlgLCR, descending(n)))
		if want := n*(n+1)/2 + n; lWorst != want {
			t.Errorf("n=%d LCR descending: %d messages, want n(n+1)/2+n = %d", n, lWorst, want)
		}
		hWorst := max(hsMsgs(runAll(t, n, AlgHS, nil)), hsMsgs(runAll(t, n, AlgHS, descending(n))))
		var lSum, hSum, pSum, pMax int
		for range trials {
			order := seq(n)
			rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
			lSum += lcrMsgs(runAll(t, n, AlgLCR, order))
			h := hsMsgs(runAll(t, n, AlgHS, order))
			hSum += h
			hWorst = max(hWorst, h)
			p := petersonMsgs(runAll(t, n, AlgPeterson, order))
			pSum += p
			pMax = max(pMax, p)
		}
		avg := func(sum int) float64 { return float64(sum) / float64(trials) }
		t.Logf("n=%d Peterson worst arrangement %v", n, pc)
		rows = append(rows, fmt.Sprintf("| %d | %d / %.1f | %d / %.1f | %d / %.1f | %d | %d |",
			n, lWorst, avg(lSum), hWorst, avg(hSum), pWorst, avg(pSum), petersonBound(n), trials))
		if m := max(pWorst, pMax); m > petersonBound(n) {
			t.Errorf("n=%d: Peterson took %d messages, more than 2n⌊log₂ n⌋+3n = %d", n, m, petersonBound(n))
		}
		if pMax > pWorst {
			t.Errorf("n=%d: a random arrangement took %d Peterson messages, more than the worst arrangement's %d", n, pMax, pWorst)
		}
		if hb := 8*n*(1+bits.Len(uint(n-1))) + n; hWorst > hb {
			t.Errorf("n=%d: HS took %d messages, more than 8n(1+⌈log₂ n⌉)+n = %d", n, hWorst, hb)
		}
	}
	t.Logf("messages per election, LEADER included:\n%s", strings.Join(rows, "\n"))
}
