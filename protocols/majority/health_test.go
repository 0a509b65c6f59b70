package majority

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// setCand changes a node's candidacy as the agent does on a health change.
func (tn *testNet) setCand(id protocols.ID, c protocols.Candidacy) {
	tn.Nodes[id].SetCandidacy(tn.Now, c)
	tn.Drain(id)
	tn.Deliver()
}

var ineligible = protocols.Candidacy{Ineligible: true}

func TestIneligibleNodesNeverCampaignButStillVote(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	tn.setCand(1, ineligible)
	tn.setCand(2, ineligible)
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l != 3 {
		t.Fatalf("leader %d, want n3, the one eligible node (it needs the others' votes)\n%s", l, tn.Status())
	}

	// Nobody eligible: after the leader crashes nobody may campaign.
	tn2 := newTestNet(3, 0, 2, baseConfig())
	for id := protocols.ID(1); id <= 3; id++ {
		tn2.setCand(id, ineligible)
	}
	tn2.Advance(10 * time.Second)
	if l := tn2.leader(); l != protocols.None {
		t.Fatalf("n%d leads though every node is ineligible\n%s", l, tn2.Status())
	}
	if tn2.Sent[protocols.MsgPreVote]+tn2.Sent[protocols.MsgVote] != 0 {
		t.Fatalf("ineligible nodes sent %d pre-votes and %d votes", tn2.Sent[protocols.MsgPreVote], tn2.Sent[protocols.MsgVote])
	}
	tn2.setCand(2, protocols.Candidacy{})
	if l, _ := tn2.runUntilLeader(5 * time.Second); l != 2 {
		t.Fatalf("leader %d once n2 is eligible again, want n2\n%s", l, tn2.Status())
	}
}

func TestIneligibleLeaderHandsOver(t *testing.T) {
	cfg := baseConfig()
	tn := newTestNet(3, 0, 3, cfg)
	old, _ := tn.runUntilLeader(10 * time.Second)
	if old == protocols.None {
		t.Fatal("no leader")
	}
	tn.Advance(time.Second) // every voter answered a heartbeat
	tn.setCand(old, ineligible)
	if st := tn.Nodes[old].Status(tn.Now); st.Role == protocols.Leader {
		t.Fatalf("n%d still reports itself leader once ineligible: %+v", old, st)
	}
	start := tn.Now
	for tn.Now.Sub(start) < cfg.ElectionTimeout {
		tn.Advance(testTick)
		if tn.Nodes[old].Status(tn.Now).Role == protocols.Leader {
			t.Fatalf("ineligible n%d reports itself leader again\n%s", old, tn.Status())
		}
		if l := tn.leader(); l != protocols.None {
			if got := tn.Nodes[old].Transfers(); got.Health != 1 {
				t.Errorf("transfers %+v, want one for health", got)
			}
			return
		}
	}
	t.Fatalf("no new leader within an election timeout of the old one turning ineligible\n%s", tn.Status())
}

func TestIneligibleLeaderWithoutTargetKeepsLeading(t *testing.T) {
	tn := newTestNet(3, 0, 4, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	var others []protocols.ID
	for _, id := range tn.Live() {
		if id != l {
			others = append(others, id)
			tn.setCand(id, ineligible)
		}
	}
	tn.Advance(time.Second)
	tn.setCand(l, ineligible)
	tn.Advance(5 * time.Second)
	st := tn.Nodes[l].Status(tn.Now)
	if st.Role != protocols.Leader || !st.NoEligibleTarget {
		t.Fatalf("n%d: %+v, want leader with NoEligibleTarget (no voter could take over)", l, st)
	}
	tn.setCand(others[1], protocols.Candidacy{})
	got, _ := tn.runUntilLeader(time.Second)
	for got == l && tn.Nodes[l].Status(tn.Now).Role == protocols.Leader {
		tn.Advance(testTick)
		if tn.Now.Sub(0) > 30*time.Second {
			t.Fatalf("n%d kept leading though n%d became eligible\n%s", l, others[1], tn.Status())
		}
	}
	if got, _ := tn.runUntilLeader(3 * time.Second); got != others[1] {
		t.Fatalf("leader %d, want n%d, the one eligible voter\n%s", got, others[1], tn.Status())
	}
}

// TestPreferredNodeTakesOverByHandover: a restarted node of higher priority
// gets leadership back once it has been stable for PreemptDelay, by a
// planned transfer: the gap without a leader is far below an election
// timeout, and nothing happens before PreemptDelay.
func TestPreferredNodeTakesOverByHandover(t *testing.T) {
	cfg := baseConfig()
	cfg.PreemptDelay = 3 * time.Second
	tn := newTestNet(3, 0, 5, cfg)
	tn.runUntilLeader(10 * time.Second)
	tn.Advance(time.Second)
	tn.crash(3)
	tn.Advance(5 * time.Second)
	l := tn.leader()
	if l == protocols.None || l == 3 {
		t.Fatalf("leader %d", l)
	}
	tn.Advance(2 * time.Second)
	tn.cfg.Candidacy = protocols.Candidacy{Priority: 10}
	tn.start(3)
	back := tn.Now
	var gapStart protocols.Time = -1
	var maxGap time.Duration
	for tn.Now.Sub(back) < cfg.PreemptDelay+5*time.Second {
		tn.Advance(testTick)
		cur := tn.leader()
		switch {
		case cur == protocols.None && gapStart < 0:
			gapStart = tn.Now
		case cur != protocols.None && gapStart >= 0:
			maxGap = max(maxGap, tn.Now.Sub(gapStart))
			gapStart = -1
		}
		if cur == 3 {
			if d := tn.Now.Sub(back); d < cfg.PreemptDelay {
				t.Fatalf("n3 took over %v after its restart, before the preempt delay %v", d, cfg.PreemptDelay)
			}
			if maxGap >= cfg.ElectionTimeout {
				t.Fatalf("%v without a leader during the hand-over", maxGap)
			}
			if got := tn.Nodes[l].Transfers(); got.Priority != 1 {
				t.Errorf("n%d's transfers %+v, want one for priority", l, got)
			}
			return
		}
	}
	t.Fatalf("n3 (priority 10) never took over\n%s", tn.Status())
}

func TestFlappingPreferredNodeNeverTakesOver(t *testing.T) {
	cfg := baseConfig()
	cfg.PreemptDelay = 3 * time.Second
	tn := newTestNet(3, 0, 6, cfg)
	tn.setCand(3, ineligible)
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None || l == 3 {
		t.Fatalf("leader %d", l)
	}
	for i := range 20 {
		c := protocols.Candidacy{Priority: 10, Ineligible: i%2 == 1}
		tn.setCand(3, c)
		tn.Advance(time.Second)
		if got := tn.leader(); got != l {
			t.Fatalf("after %d flaps leader is %d, want n%d to keep it\n%s", i+1, got, l, tn.Status())
		}
	}
}

// TestSetCandidacyAbandonsCampaign: a candidate that turns ineligible
// stops campaigning at once and cannot win the term it started.
func TestSetCandidacyAbandonsCampaign(t *testing.T) {
	tn := newTestNet(3, 0, 7, baseConfig())
	tn.Isolate(1)
	for tn.Nodes[1].Status(tn.Now).Role != protocols.Candidate {
		tn.Advance(testTick)
		if tn.Now.Sub(0) > 10*time.Second {
			t.Fatal("n1 never campaigned")
		}
	}
	tn.setCand(1, ineligible)
	if st := tn.Nodes[1].Status(tn.Now); st.Role != protocols.Follower {
		t.Fatalf("n1 %+v after turning ineligible, want follower", st)
	}
	tn.Heal()
	tn.Advance(10 * time.Second)
	if tn.leader() == 1 {
		t.Fatalf("ineligible n1 leads\n%s", tn.Status())
	}
}

// TestIneligibleNewLeaderWaitsForCandidacies: a leader that turns
// ineligible before any voter answered its heartbeats knows no voter's
// candidacy yet. It must not take them for eligible: handing over to an
// ineligible voter times out and leaves no leader until one turns
// eligible. It keeps leading (NoEligibleTarget) until answers tell it
// whom it may hand over to; here nobody.
func TestIneligibleNewLeaderWaitsForCandidacies(t *testing.T) {
	tn := newTestNet(3, 0, 5, baseConfig())
	tn.setCand(2, ineligible)
	tn.setCand(3, ineligible)
	n1 := tn.Nodes[1]
	// Hold back the heartbeat answers until n1 has turned ineligible.
	tn.Drop = func(m protocols.Message) bool { return m.Kind == protocols.MsgHeartbeatResp }
	for n1.state != stateLeader {
		if tn.Now > protocols.Time(10*time.Second) {
			t.Fatalf("n1, the one eligible voter, did not win\n%s", tn.Status())
		}
		tn.Advance(testTick)
	}
	if len(n1.peerCand) != 0 {
		t.Fatalf("n1 heard candidacies (%v) in the step it won: the test needs it not to have", n1.peerCand)
	}
	n1.SetCandidacy(tn.Now, ineligible)
	if n1.transferTo != protocols.None {
		t.Fatalf("n1 hands over to n%d, whose candidacy it has not heard", n1.transferTo)
	}
	tn.Drop = nil
	tn.Drain(1)
	tn.Advance(3 * time.Second)
	if st := n1.Status(tn.Now); st.Role != protocols.Leader || !st.NoEligibleTarget {
		t.Errorf("n1: %+v, want leader with NoEligibleTarget\n%s", st, tn.Status())
	}
	if n := tn.Sent[protocols.MsgTimeoutNow]; n != 0 {
		t.Errorf("%d TimeoutNow sent to ineligible voters", n)
	}
}
