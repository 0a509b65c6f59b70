package core

import (
	"errors"
	"testing"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// gossipObserver makes the test node an observer of a, b and c in a
// cluster that gossips (the observers' path), restarted with floor.
func gossipObserver(floor uint64, unsafe Unsafe) func(*Config) {
	return func(c *Config) {
		asObserver(c)
		c.Gossip = true
		c.ObservedEpoch = floor
		c.Unsafe = unsafe
	}
}

// floorShell carries out Ready as the agent does and records what it
// persisted, and whether a status was published with an epoch above the
// floor persisted so far (which a crash right then would take back).
type floorShell struct {
	persisted []uint64
	durable   uint64
	early     []api.Status
}

func (s *floorShell) drain(tn *testNode) {
	for tn.HasReady() {
		rd := tn.Ready()
		if rd.ObservedEpoch != 0 {
			s.persisted = append(s.persisted, rd.ObservedEpoch)
			s.durable = rd.ObservedEpoch
		}
		if rd.Status != nil && rd.Status.Epoch > s.durable && rd.Status.Role == "observer" {
			s.early = append(s.early, *rd.Status)
		}
		tn.Advance(rd)
	}
}

func (s *floorShell) gossip(t *testing.T, tn *testNode, ann observe.Announcement) {
	t.Helper()
	if err := tn.Gossiped(tn.now, ann.Append(nil)); err != nil {
		t.Fatal(err)
	}
	s.drain(tn)
}

func checkReported(t *testing.T, tn *testNode, leader string, epoch uint64) {
	t.Helper()
	st := tn.Status(tn.now)
	if st.Leader != leader || st.Epoch != epoch {
		t.Fatalf("status: leader %q epoch %d (role %s), want %q and %d", st.Leader, st.Epoch, st.Role, leader, epoch)
	}
	if leader == "" && st.LeaderAgeMS != 0 {
		t.Fatalf("no leader reported, yet leader_age_ms %d", st.LeaderAgeMS)
	}
}

// TestObservedEpochSurvivesRestart: an observer asks its shell to persist
// an epoch it learned by gossip before it reports it, and only when the
// epoch rises; restarted with that floor, before any announcement, it
// reports the floor epoch and no leader, and ignores older announcements.
// Without the floor (Unsafe.ForgetObserved, the old behaviour) the
// restarted observer reports epoch 0.
func TestObservedEpochSurvivesRestart(t *testing.T) {
	var sh floorShell
	tn, _ := newTestNode(t, ProtocolMajority, gossipObserver(0, Unsafe{}))
	joinFleet(tn)
	sh.gossip(t, tn, observe.Announcement{Leader: 2, Epoch: 7, Term: 7, Seq: 1})
	checkReported(t, tn, "a", 7)
	sh.gossip(t, tn, observe.Announcement{Leader: 2, Epoch: 7, Term: 7, Seq: 2})
	if len(sh.persisted) != 1 || sh.persisted[0] != 7 {
		t.Fatalf("persisted %v, want [7]: once, when the epoch rose", sh.persisted)
	}
	if len(sh.early) != 0 {
		t.Fatalf("published before the epoch was persisted: %+v", sh.early)
	}

	// Restart from the persisted floor; the voters are silent.
	sh2 := floorShell{durable: sh.durable}
	re, _ := newTestNode(t, ProtocolMajority, gossipObserver(sh.durable, Unsafe{}))
	joinFleet(re)
	sh2.drain(re)
	checkReported(t, re, "", 7)
	if st := re.Status(re.now); st.Role != "observer" {
		t.Fatalf("restarted observer reports role %s", st.Role)
	}
	sh2.gossip(t, re, observe.Announcement{Leader: 3, Epoch: 5, Term: 5, Seq: 9})
	checkReported(t, re, "", 7) // older than the floor: ignored
	sh2.gossip(t, re, observe.Announcement{Leader: 2, Epoch: 7, Term: 7, Seq: 3})
	checkReported(t, re, "a", 7) // the floor's own epoch: its leader is known again
	sh2.gossip(t, re, observe.Announcement{Leader: 4, Epoch: 9, Term: 9, Seq: 1})
	checkReported(t, re, "c", 9)
	if len(sh2.persisted) != 1 || sh2.persisted[0] != 9 || len(sh2.early) != 0 {
		t.Fatalf("after the restart: persisted %v (want [9]), published early %+v", sh2.persisted, sh2.early)
	}

	// The planted bug: nothing persisted, so a restart reports epoch 0.
	var sh3 floorShell
	bad, _ := newTestNode(t, ProtocolMajority, gossipObserver(0, Unsafe{ForgetObserved: true}))
	joinFleet(bad)
	sh3.gossip(t, bad, observe.Announcement{Leader: 2, Epoch: 7, Term: 7, Seq: 1})
	checkReported(t, bad, "a", 7)
	if len(sh3.persisted) != 0 {
		t.Fatalf("ForgetObserved persisted %v", sh3.persisted)
	}
	bad2, _ := newTestNode(t, ProtocolMajority, gossipObserver(sh3.durable, Unsafe{ForgetObserved: true}))
	checkReported(t, bad2, "", 0)
}

// TestFloorHidesAStaleProtocolEpoch: a node whose protocol knows an epoch
// below the floor (restarted as a voter of a configuration it missed, say)
// reports the floor and no leader, never the stale claim.
func TestFloorHidesAStaleProtocolEpoch(t *testing.T) {
	tn, _ := newTestNode(t, ProtocolMajority, func(c *Config) {
		c.Election.HardState = protocols.HardState{Term: 3, Epoch: 3}
		c.ObservedEpoch = 6
	})
	var sh floorShell
	sh.drain(tn)
	if st := tn.Status(tn.now); st.Epoch != 6 || st.Leader != "" || st.Role == "leader" {
		t.Fatalf("status %+v, want epoch 6, no leader", st)
	}
	if len(sh.persisted) != 0 {
		t.Fatalf("persisted %v: the floor from Config is already durable", sh.persisted)
	}
}

func TestObservedEpochAboveCeilingRefused(t *testing.T) {
	cfg := Config{
		Election: ProtocolSpec{Protocol: ProtocolMajority, Self: protocols.Member{ID: 1, Name: "self"},
			Voters: []string{"a"}, Rand: NewRand(1, 2)},
		Detector:      phi.DefaultConfig(),
		ObservedEpoch: protocols.Ceiling + 1,
	}
	if _, err := New(cfg); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("New with an observed epoch above the ceiling: %v, want ErrBeyondCeiling", err)
	}
}

// TestAnnouncementBeyondCeilingRefused: a hostile or buggy announcement
// above what the ceiling admits is refused and counted; it is neither
// reported nor handed to the shell to persist (the store would refuse it
// and stop the agent).
func TestAnnouncementBeyondCeilingRefused(t *testing.T) {
	var sh floorShell
	tn, _ := newTestNode(t, ProtocolMajority, gossipObserver(0, Unsafe{}))
	joinFleet(tn)
	sh.gossip(t, tn, observe.Announcement{Leader: 2, Epoch: 7, Term: 7, Seq: 1})
	for _, ann := range []observe.Announcement{
		{Leader: 3, Epoch: protocols.Ceiling + 1, Term: 8, Seq: 1},
		{Leader: 3, Epoch: protocols.MaxAccepted + protocols.TermSlack + 1, Term: 8, Seq: 1},
		{Leader: 3, Epoch: 8, Term: protocols.Ceiling + 1, Seq: 1},
	} {
		err := tn.Gossiped(tn.now, ann.Append(nil))
		if !errors.Is(err, protocols.ErrBeyondCeiling) {
			t.Fatalf("announcement %+v: %v, want ErrBeyondCeiling", ann, err)
		}
		sh.drain(tn)
	}
	checkReported(t, tn, "a", 7)
	if len(sh.persisted) != 1 || sh.persisted[0] != 7 {
		t.Fatalf("persisted %v, want [7]", sh.persisted)
	}
	if s := tn.Stats(); s.BeyondCeiling != 3 || s.StepErrors != 3 {
		t.Fatalf("counted %d beyond the ceiling, %d refused; want 3 and 3", s.BeyondCeiling, s.StepErrors)
	}
	// Below MaxAccepted anything goes: a fresh observer of an old cluster.
	sh.gossip(t, tn, observe.Announcement{Leader: 3, Epoch: protocols.MaxAccepted, Term: protocols.MaxAccepted, Seq: 1})
	checkReported(t, tn, "b", protocols.MaxAccepted)
}
