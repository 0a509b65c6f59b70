package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// t0 is an arbitrary origin for synthetic histories.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) int64 { return t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }

func status(ms int, node, role string, epoch uint64) Record {
	return Record{T: at(ms), Kind: kindStatus, Node: node, Up: true, Role: role, Epoch: epoch}
}

// cleanHistory is a failover that breaks nothing: n1 leads in epoch 1, is
// killed, n2 leads in epoch 2, n1 comes back as follower.
func cleanHistory() ([]Record, []JobRow) {
	recs := []Record{
		status(0, "n1", "leader", 1),
		status(0, "n2", "follower", 1),
		{T: at(0), Kind: kindHardState, Node: "n1", Term: 1, Vote: 1, Epoch: 1},
		{T: at(0), Kind: kindHardState, Node: "n2", Term: 1, Vote: 1, Epoch: 1},
		{T: at(1000), Kind: kindSched, Node: "n1", Ev: "write", Epoch: 1, Tick: 1, Result: "accepted"},
		{T: at(1500), Kind: kindFault, Fault: "kill-leader", Round: 1, Targets: []string{"n1"}, Epoch: 1, LeaderHit: true},
		{T: at(1500), Kind: kindStatus, Node: "n1"},
		{T: at(2000), Kind: kindHardState, Node: "n2", Term: 2, Vote: 2, Epoch: 1},
		status(2700, "n2", "leader", 2),
		{T: at(3000), Kind: kindSched, Node: "n2", Ev: "raise", Epoch: 2, Result: "accepted"},
		{T: at(3000), Kind: kindSched, Node: "n2", Ev: "write", Epoch: 2, Tick: 3, Result: "accepted"},
		{T: at(4000), Kind: kindHeal, Fault: "kill-leader", Round: 1},
		status(4500, "n1", "follower", 2),
	}
	jobs := []JobRow{
		{Seq: 1, Schedule: "s", Tick: 1, Epoch: 1, Node: "n1"},
		{Seq: 2, Schedule: "s", Tick: 3, Epoch: 2, Node: "n2"},
	}
	return recs, jobs
}

func TestCheckCleanHistory(t *testing.T) {
	recs, jobs := cleanHistory()
	r := Check(recs, jobs, 2, 10*time.Second)
	if len(r.Violations) != 0 {
		t.Fatalf("violations in a clean history: %v", r.Violations)
	}
	if r.Elections != 2 || r.WritesAccepted != 2 || r.Jobs != 2 || r.Rounds != 1 {
		t.Fatalf("report %+v", r)
	}
	if d := r.FailoverTime["kill-leader"]; len(d) != 1 || d[0] != 1200*time.Millisecond {
		t.Fatalf("failover time %v, want [1.2s]", d)
	}
	if d := r.RecoveryTime["kill-leader"]; len(d) != 1 || d[0] != 0 {
		t.Fatalf("recovery time %v, want [0s] (a leader already existed at the heal)", d)
	}
}

// Each case breaks one invariant; the checker must name it.
func TestCheckFindsViolations(t *testing.T) {
	cases := []struct {
		name string
		edit func([]Record, []JobRow) ([]Record, []JobRow)
		want string
	}{
		{"two leaders in one epoch", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r, status(2800, "n3", "leader", 2)), j
		}, "two leaders in epoch 2"},
		{"epoch goes back", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r, status(5000, "n1", "follower", 1)), j
		}, "n1: epoch went back"},
		{"term goes back across a restart", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r, Record{T: at(5000), Kind: kindHardState, Node: "n2", Term: 1, Vote: 1, Epoch: 2}), j
		}, "term went back"},
		{"two votes in one term", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r, Record{T: at(2500), Kind: kindHardState, Node: "n2", Term: 2, Vote: 3, Epoch: 1}), j
		}, "voted twice in term 2"},
		{"stale job accepted", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return r, append(j, JobRow{Seq: 3, Schedule: "s", Tick: 4, Epoch: 1, Node: "n1"})
		}, "stale write accepted"},
		{"duplicate job", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return r, append(j, JobRow{Seq: 3, Schedule: "s", Tick: 3, Epoch: 2, Node: "n2"})
		}, "duplicate job s/3"},
		{"no leader after a heal", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r,
				Record{T: at(6000), Kind: kindStatus, Node: "n2"},
				Record{T: at(6000), Kind: kindFault, Fault: "pause-leader", Round: 2, Targets: []string{"n2"}, Epoch: 2, LeaderHit: true},
				Record{T: at(8000), Kind: kindHeal, Fault: "pause-leader", Round: 2},
				status(30000, "n1", "leader", 3)), j
		}, "no leader until 22s after the heal"},
		{"no leader before the end", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r,
				Record{T: at(6000), Kind: kindStatus, Node: "n2"},
				Record{T: at(8000), Kind: kindHeal, Fault: "split", Round: 2}), j
		}, "the run ended first"},
		{"frozen scheduler's write accepted", func(r []Record, j []JobRow) ([]Record, []JobRow) {
			return append(r,
				Record{T: at(9000), Kind: kindWake, Node: "n1"},
				Record{T: at(9001), Kind: kindSched, Node: "n1", Ev: "write", Epoch: 1, Tick: 9, Result: "accepted"}), j
		}, "first write on waking was accepted in epoch 1 after a leader in epoch 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, jobs := c.edit(cleanHistory())
			r := Check(recs, jobs, 2, 10*time.Second)
			for _, v := range r.Violations {
				if strings.Contains(v, c.want) {
					return
				}
			}
			t.Fatalf("violations %q, want one containing %q", r.Violations, c.want)
		})
	}
}

func TestFreezeRejectedIsReported(t *testing.T) {
	recs, jobs := cleanHistory()
	recs = append(recs,
		Record{T: at(9000), Kind: kindWake, Node: "n1"},
		Record{T: at(9001), Kind: kindSched, Node: "n1", Ev: "write", Epoch: 1, Tick: 9, Result: "stale"},
		Record{T: at(9500), Kind: kindSched, Node: "n1", Ev: "write", Epoch: 1, Tick: 9, Result: "accepted"})
	r := Check(recs, jobs, 2, 10*time.Second)
	if len(r.FreezeFirstWrite) != 1 || r.FreezeFirstWrite[0] != "stale" {
		t.Fatalf("FreezeFirstWrite = %q, want [stale]", r.FreezeFirstWrite)
	}
}

// TestFreezeAcceptedWithoutNewerLeader: when nobody was elected while the
// scheduler slept, its write is not stale and must not be flagged.
func TestFreezeAcceptedWithoutNewerLeader(t *testing.T) {
	recs, jobs := cleanHistory()
	recs = append(recs,
		Record{T: at(9000), Kind: kindWake, Node: "n2"},
		Record{T: at(9001), Kind: kindSched, Node: "n2", Ev: "write", Epoch: 2, Tick: 9, Result: "accepted"})
	r := Check(recs, jobs, 2, 10*time.Second)
	if len(r.Violations) != 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
	if len(r.FreezeFirstWrite) != 1 || !strings.HasPrefix(r.FreezeFirstWrite[0], "accepted, no newer leader") {
		t.Fatalf("FreezeFirstWrite = %q", r.FreezeFirstWrite)
	}
}

func TestHistoryRoundTripSorted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := CreateHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	h.Add(Record{T: at(20), Kind: kindNote, Detail: "second"})
	h.Add(Record{T: at(10), Kind: kindNote, Detail: "first"})
	h.Add(Record{Kind: kindNote, Detail: "stamped now"})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Detail != "first" || recs[1].Detail != "second" || recs[2].T == 0 {
		t.Fatalf("records %+v", recs)
	}
	if _, err := ReadHistory(strings.NewReader("{not json\n")); err == nil {
		t.Fatal("garbage history read without error")
	}
}

// A key rotation round during which the leader stays is clean; one
// during which an agent reports a higher epoch is a violation.
func TestCheckRotationKeepsLeadership(t *testing.T) {
	rotation := func(mid Record) []Record {
		return []Record{
			status(0, "n1", "leader", 1),
			status(0, "n2", "follower", 1),
			{T: at(1000), Kind: kindFault, Fault: rotateKey, Round: 1, Targets: []string{"n2"}, Epoch: 1},
			mid,
			{T: at(3000), Kind: kindHeal, Fault: rotateKey, Round: 1},
			status(4000, "n2", "leader", 2), // after the heal: not the rotation's doing
		}
	}
	if r := Check(rotation(status(2000, "n2", "follower", 1)), nil, 0, 10*time.Second); len(r.Violations) != 0 {
		t.Errorf("a rotation that kept the leader: violations %v", r.Violations)
	}
	r := Check(rotation(status(2000, "n2", "leader", 2)), nil, 0, 10*time.Second)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0], "leadership moved during the key rotation of round 1") {
		t.Errorf("a rotation during which n2 took over: violations %v", r.Violations)
	}
}
