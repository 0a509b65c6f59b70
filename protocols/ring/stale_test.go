package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
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

// A message of a member's own candidacy sent to it just before it became
// suspected is not re-sent past it (resend): routed round the members that
// skip it, it could only come back to them and be handed to it again
// (toward), so its round died with it. Messages of other candidates are
// still re-sent to the next live member.
func TestLostCandidatesOwnMessageNotResent(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			n, err := New(Config{
				ID: 2, Members: testnet.Members(seq(3)), Algorithm: alg,
				HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			n.Advance(n.Ready())
			// 3's election message (LCR), HS reply or Peterson
			// WINNER on its way back to 3.
			m := protocols.Message{Kind: protocols.MsgRingElect, From: 1, To: 2, Candidate: 3, Hops: 2}
			switch alg {
			case AlgHS:
				m = protocols.Message{Kind: protocols.MsgHSReply, From: 1, To: 2, Candidate: 3, Hops: 1, Direction: protocols.Clockwise}
			case AlgPeterson:
				m = protocols.Message{Kind: protocols.MsgPetersonWinner, From: 1, To: 2, Candidate: 3, Round: 1, Hops: 2}
			}
			if err := n.Step(1, m); err != nil {
				t.Fatal(err)
			}
			rd := n.Ready()
			n.Advance(rd)
			if len(rd.Messages) != 1 || rd.Messages[0].To != 3 || rd.Messages[0].Candidate != 3 {
				t.Fatalf("node 2 sent %+v, want 3's message passed on to 3", rd.Messages)
			}
			n.Suspect(2, 3, true)
			if rd := n.Ready(); len(rd.Messages) != 0 {
				t.Fatalf("after suspecting 3, node 2 sent %+v, want nothing: 3's own message has nowhere to go but 3", rd.Messages)
			}
		})
	}
}
