package core

import (
	"testing"
	"time"
)

// TestLeaderlessMeasuresFailover: the time from losing a leader to
// knowing the next lands in its bucket; the start, before any leader, and
// a direct change from one leader to another are not counted as gaps.
func TestLeaderlessMeasuresFailover(t *testing.T) {
	tn, _ := newTestNode(t, ProtocolBully)
	now := tn.now
	tn.noteLeaderless(now, "", "a")  // the start: no failover
	tn.noteLeaderless(now, "a", "b") // a direct change: no gap
	if tn.stats.LeaderlessCount != 0 {
		t.Fatalf("counted %d failovers before any leader was lost", tn.stats.LeaderlessCount)
	}
	tn.noteLeaderless(now, "b", "")
	tn.noteLeaderless(now.Add(250*time.Millisecond), "", "c")
	tn.noteLeaderless(now.Add(time.Second), "c", "")
	tn.noteLeaderless(now.Add(time.Second+1500*time.Millisecond), "", "a")
	s := tn.Stats()
	if s.LeaderlessCount != 2 || s.LeaderlessSum != 1750*time.Millisecond {
		t.Fatalf("count %d sum %v, want 2 and 1.75s", s.LeaderlessCount, s.LeaderlessSum)
	}
	// 250ms falls in the ≤300ms bucket (index 2), 1.5s in ≤2s (index 5).
	if s.Leaderless[2] != 1 || s.Leaderless[5] != 1 {
		t.Fatalf("buckets %v, want one at index 2 and one at index 5", s.Leaderless)
	}
}
