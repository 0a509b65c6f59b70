package ring

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// petersonNode is node id of a ring of 1…n running Peterson, its first
// Ready taken.
func petersonNode(t *testing.T, id protocols.ID, n int) *Node {
	t.Helper()
	nd, err := New(Config{
		ID: id, Members: testnet.Members(seq(n)), Algorithm: AlgPeterson,
		HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	nd.Advance(nd.Ready())
	return nd
}

// step hands nd message m from its predecessor and returns what it sent,
// as "Kind cand=C phase=P round=R" lines.
func step(t *testing.T, nd *Node, m protocols.Message) []string {
	t.Helper()
	m.To = nd.id
	if m.Hops == 0 {
		m.Hops = 1
	}
	if err := nd.Step(1, m); err != nil {
		t.Fatal(err)
	}
	rd := nd.Ready()
	nd.Advance(rd)
	var out []string
	for _, s := range rd.Messages {
		out = append(out, fmt.Sprintf("%v cand=%d phase=%d round=%d", s.Kind, s.Candidate, s.Phase, s.Round))
	}
	return out
}

func same(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: sent %q, want %q", what, got, want)
	}
}

// A SECOND that overtakes its phase's FIRST is held until the FIRST comes:
// the node then passes the FIRST's value on and decides the phase.
func TestPetersonHoldsEarlyMessages(t *testing.T) {
	nd := petersonNode(t, 2, 4)
	nd.Campaign(0)
	nd.Advance(nd.Ready())
	same(t, "early SECOND", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonSecond, From: 1, Candidate: 1, Round: 1}))
	// 4 > 2 and 4 > 1: 2 stays active with 4.
	same(t, "FIRST", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 1, Candidate: 4, Round: 1}),
		"PetersonSecond cand=4 phase=0 round=1", "PetersonFirst cand=4 phase=1 round=1")
	// A duplicate of a decided phase's FIRST changes nothing.
	same(t, "old FIRST", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 1, Candidate: 4, Round: 1}))
}

// A node that relays passes every message of its round on, whatever its
// phase, and one that turns relay passes on what it held for later phases.
func TestPetersonRelayPassesHeldMessages(t *testing.T) {
	nd := petersonNode(t, 3, 4)
	nd.Campaign(0)
	nd.Advance(nd.Ready())
	same(t, "FIRST of phase 1, early", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 2, Candidate: 4, Phase: 1, Round: 1}))
	same(t, "FIRST", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 2, Candidate: 1, Round: 1}),
		"PetersonSecond cand=1 phase=0 round=1")
	// 1 < 3: 3 relays from now on, and passes the held FIRST on.
	same(t, "SECOND", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonSecond, From: 2, Candidate: 2, Round: 1}),
		"PetersonFirst cand=4 phase=1 round=1")
	same(t, "as relay", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonSecond, From: 2, Candidate: 2, Phase: 1, Round: 1}),
		"PetersonSecond cand=2 phase=1 round=1")
}

// A node taking part in a round ignores an older round's messages and
// leaves its round for a newer one, joining it as it would any round.
func TestPetersonRounds(t *testing.T) {
	nd := petersonNode(t, 2, 3)
	same(t, "round 5 opens", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 1, Candidate: 1, Round: 5}),
		"PetersonFirst cand=2 phase=0 round=5", "PetersonSecond cand=1 phase=0 round=5")
	same(t, "round 4", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 1, Candidate: 1, Round: 4}))
	same(t, "round 6", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 1, Candidate: 3, Round: 6}),
		"PetersonFirst cand=3 phase=0 round=6")
	if s := nd.Status(1); s.Role != protocols.Follower {
		t.Fatalf("after a higher candidate's round: %v, want follower (relay)", s.Role)
	}
	// Its own next round starts above every round it saw.
	nd.Campaign(2)
	rd := nd.Ready()
	if len(rd.Messages) != 1 || rd.Messages[0].Round != 7 || rd.Messages[0].Candidate != 2 {
		t.Fatalf("new round: %v, want round 7 with candidate 2", rd.Messages)
	}
}

// A node that missed the start of a round of lower values starts a new
// round rather than relay a round it would lose; a node that missed the
// start of a round it cannot win relays it.
func TestPetersonLateJoin(t *testing.T) {
	nd := petersonNode(t, 3, 3)
	same(t, "lower round under way", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 2, Candidate: 2, Phase: 1, Round: 4}),
		"PetersonFirst cand=3 phase=0 round=5")
	nd = petersonNode(t, 1, 3)
	same(t, "higher round under way", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonFirst, From: 3, Candidate: 3, Phase: 1, Round: 4}),
		"PetersonFirst cand=3 phase=1 round=4")
	same(t, "WINNER", step(t, nd, protocols.Message{Kind: protocols.MsgPetersonWinner, From: 3, Candidate: 2, Round: 4}),
		"PetersonWinner cand=2 phase=0 round=4")
}
