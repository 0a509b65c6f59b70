package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// A member's stale suspicion of a live candidate must not keep the
// candidate's election message from coming back to it. Suspecting nodes
// that never hear from the candidate directly (in the agent, only a message
// from the suspect clears a suspicion) routed its message past it, round
// and round the rest of the ring, and it was never elected:
//
//   - "only-eligible": after a health fault only 2 is eligible, and 1 still
//     suspects it; 2's ELECT goes 2→3→1→3→1… (the core-mode simulator's
//     seed 12152912330625405863 under health faults, docs/bully-ring.md).
//   - "highest": 2, 3 and 4 suspect the live 5; 1, elected without it,
//     heartbeats 5, which runs, but its messages come back to 4, which
//     skips 5 (docs/simulator.md, finding 5).
//
// Both elect their candidate within a few election timeouts with the
// routing rule (toward); without it neither ever does. The bound is not a
// timing assertion: the stalled-round timer would repeat for ever.
func TestElectionNotRoutedPastStaleSuspicion(t *testing.T) {
	const et = 100 * time.Millisecond // the test network's ElectionTimeout
	cases := []struct {
		name     string
		n        int
		want     protocols.ID
		suspects map[protocols.ID][]protocols.ID // who suspects whom, from the start
		tweak    func(*Config)
	}{
		{"only-eligible", 3, 2, map[protocols.ID][]protocols.ID{1: {2}}, func(c *Config) {
			c.Candidacy.Ineligible = c.ID != 2
		}},
		{"highest", 5, 5, map[protocols.ID][]protocols.ID{2: {5}, 3: {5}, 4: {5}}, nil},
	}
	for _, alg := range algs {
		for _, tc := range cases {
			t.Run(alg+"/"+tc.name, func(t *testing.T) {
				nw := newNetwork(t, seq(tc.n), func(c *Config) {
					c.Algorithm = alg
					if tc.tweak != nil {
						tc.tweak(c)
					}
				})
				for id, ss := range tc.suspects {
					for _, s := range ss {
						nw.Nodes[id].Suspect(nw.Now, s, true)
					}
				}
				limit := nw.Now.Add(30 * et)
				for !nw.AgreesOn(tc.want) {
					if nw.Now >= limit {
						t.Fatalf("no agreement on %d after %v: its election messages go round the nodes that suspect it\n%s", tc.want, 30*et, nw.Status())
					}
					nw.Advance(time.Millisecond)
				}
				for id, ss := range tc.suspects {
					for _, s := range ss {
						if nw.Nodes[id].members.Live(s) {
							t.Fatalf("node %d no longer suspects %d: the test must keep the suspicion", id, s)
						}
					}
				}
			})
		}
	}
}
