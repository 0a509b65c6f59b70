package majority

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// One heartbeat with a term near 2^64 used to be adopted and persisted; the
// next election then wrapped the term and the cluster never elected again.
func TestAbsurdTermIsRefusedAndChangesNothing(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	tn.runUntilLeader(10 * time.Second)
	n := tn.Nodes[1]
	before, hs := n.Status(tn.Now), n.hardState()
	for _, kind := range []protocols.MessageKind{protocols.MsgHeartbeat, protocols.MsgVote, protocols.MsgPreVote, protocols.MsgVoteResp} {
		m := protocols.Message{Kind: kind, From: 2, To: 1, Leader: 2, Term: math.MaxUint64 - 1, Epoch: math.MaxUint64 - 1}
		if err := n.Step(tn.Now, m); !errors.Is(err, protocols.ErrBeyondCeiling) {
			t.Errorf("Step(%v) = %v, want ErrBeyondCeiling", m, err)
		}
	}
	if got := n.Status(tn.Now); got != before {
		t.Errorf("status changed: %+v -> %+v", before, got)
	}
	if n.hardState() != hs || len(n.out.Pending()) != 0 {
		t.Errorf("refused message changed state or queued messages")
	}
}

// A cluster pushed to the largest accepted term keeps electing, leader
// crash after leader crash, and its term only rises.
func TestElectsOnAfterLargestAcceptedTerm(t *testing.T) {
	tn := newTestNet(3, 0, 2, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	other := l%3 + 1
	m := protocols.Message{Kind: protocols.MsgHeartbeat, From: l, To: other, Leader: l, Term: protocols.MaxAccepted}
	if err := tn.Nodes[other].Step(tn.Now, m); err != nil {
		t.Fatalf("largest accepted term refused: %v", err)
	}
	tn.Drain(other)
	last := uint64(0)
	for range 4 {
		tn.crash(l)
		l, _ = tn.runUntilLeader(20 * time.Second)
		if l == protocols.None {
			t.Fatalf("no leader after the crash:\n%s", tn.Status())
		}
		term := tn.Nodes[l].Status(tn.Now).Term
		if term <= protocols.MaxAccepted || term <= last {
			t.Fatalf("leader's term %d, want above %d and above the previous %d", term, protocols.MaxAccepted, last)
		}
		last = term
		// Restart every crashed node from its disk.
		for _, mb := range tn.members {
			if tn.Nodes[mb.ID] == nil {
				tn.start(mb.ID)
			}
		}
	}
}

func TestNewRefusesHardStateBeyondCeiling(t *testing.T) {
	cfg := baseConfig()
	cfg.ID, cfg.Voters = 1, []string{"n1"}
	cfg.Members = []protocols.Member{{ID: 1, Name: "n1"}}
	cfg.HardState = protocols.HardState{Term: math.MaxUint64 - 1, Epoch: math.MaxUint64 - 1}
	if _, err := New(cfg); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Errorf("New = %v, want ErrBeyondCeiling", err)
	}
}

// A node whose term is at the ceiling does not campaign: the next term
// would pass it. It stays a follower instead of wrapping.
func TestNoCampaignAtTheCeiling(t *testing.T) {
	cfg := baseConfig()
	cfg.ID, cfg.Voters = 1, []string{"n1"}
	cfg.Members = []protocols.Member{{ID: 1, Name: "n1"}}
	cfg.HardState = protocols.HardState{Term: protocols.Ceiling, Epoch: protocols.Ceiling}
	cfg.Rand = rand.New(rand.NewPCG(1, 1))
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for now := protocols.Time(0); now < protocols.Time(5*time.Second); now += protocols.Time(10 * time.Millisecond) {
		n.Tick(now)
		for n.HasReady() {
			rd := n.Ready()
			if rd.HardState != nil && rd.HardState.Term > protocols.Ceiling {
				t.Fatalf("persisted term %d beyond the ceiling", rd.HardState.Term)
			}
			n.Advance(rd)
		}
	}
	if st := n.Status(protocols.Time(5 * time.Second)); st.Role == protocols.Leader || st.Term != protocols.Ceiling {
		t.Fatalf("status %+v, want a follower at the ceiling", st)
	}
}
