package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// op is a client request of node, asked by its obs ("status",
// "consistent", "watch"), from call to ret (ms since t0), answered role,
// leader, epoch and lease (ms).
func op(node, kind string, call, ret int, role, leader string, epoch uint64, leaseMS int) Record {
	return Record{
		T: at(call), Kind: kindOp, Node: node, Op: kind, Obs: node + "/" + kind,
		Call: at(call), Ret: at(ret), Up: true,
		Role: role, Leader: leader, Epoch: epoch, LeaseNS: int64(leaseMS) * int64(time.Millisecond),
	}
}

// cleanOps: n1 leads epoch 1 with 190 ms leases, is lost at 1000 ms; n2
// wins epoch 2 at 1300 ms; followers lag and catch up.
func cleanOps() []Record {
	return []Record{
		op("n1", opStatus, 0, 1, "leader", "n1", 1, 190),
		op("n2", opStatus, 0, 1, "follower", "n1", 1, 0),
		op("n1", opConsistent, 50, 53, "leader", "n1", 1, 185),
		op("n2", opConsistent, 50, 51, "follower", "n1", 1, 0),
		op("n1", opWatch, 60, 60, "leader", "n1", 1, 190),
		op("n1", opStatus, 900, 901, "leader", "n1", 1, 80),
		op("n2", opStatus, 1200, 1201, "candidate", "", 1, 0),
		{T: at(1250), Kind: kindOp, Node: "n1", Op: opStatus, Obs: "n1/status", Call: at(1250), Ret: at(1550), Err: "timeout"},
		op("n2", opWatch, 1300, 1300, "leader", "n2", 2, 190),
		// Concurrent reads may return out of order: n2's read of epoch 2
		// returns before n1's older answer, but n1's was called first and
		// may have taken effect first.
		op("n1", opConsistent, 1290, 1400, "follower", "", 1, 0),
		op("n2", opStatus, 1310, 1311, "leader", "n2", 2, 188),
		op("n2", opConsistent, 1320, 1325, "leader", "n2", 2, 186),
		op("n1", opStatus, 1600, 1601, "follower", "n2", 2, 0),
	}
}

func checkRecs(t *testing.T, recs []Record) *Report {
	t.Helper()
	r := &Report{}
	checkOps(recs, r)
	return r
}

func wantViolation(t *testing.T, r *Report, substr string) {
	t.Helper()
	for _, v := range r.Violations {
		if strings.Contains(v, substr) {
			return
		}
	}
	t.Fatalf("no violation containing %q in %q", substr, r.Violations)
}

func TestOpsClean(t *testing.T) {
	r := checkRecs(t, cleanOps())
	if len(r.Violations) != 0 {
		t.Fatalf("violations in a clean history: %v", r.Violations)
	}
	o := r.Ops
	if o.Linearizable != "Ok" || o.Ops != 12 || o.OpsFailed != 1 || o.LeaderReads != 5 || o.Consistent != 2 {
		t.Fatalf("report %+v", o)
	}
	// Five leader answers besides the watch event (never a claim), each
	// with a lease longer than its call→return: five certain claims.
	if o.LeaseClaims != 5 {
		t.Fatalf("lease claims %d, want 5", o.LeaseClaims)
	}
	// n1's last claim ends at 900 + 80 ms, n2's first starts at 1311 ms.
	if o.LeaseGapMin != 331*time.Millisecond {
		t.Fatalf("closest leases %v apart, want 331ms", o.LeaseGapMin)
	}
	if o.vis != nil {
		t.Fatal("a visualisation for a clean history")
	}
}

func TestOpsTwoLeadersInAnEpoch(t *testing.T) {
	recs := append(cleanOps(), op("n3", opWatch, 1700, 1700, "leader", "n3", 2, 0))
	r := checkRecs(t, recs)
	wantViolation(t, r, "two leaders in epoch 2: n2 and n3")
	if r.Ops.TwoLeaders != 1 {
		t.Fatalf("two leaders %d, want 1", r.Ops.TwoLeaders)
	}
}

func TestOpsEpochGoesBack(t *testing.T) {
	recs := append(cleanOps(), op("n2", opStatus, 1700, 1701, "follower", "n1", 1, 0))
	r := checkRecs(t, recs)
	wantViolation(t, r, "n2/status saw the epoch go back from 2 to 1")
	if r.Ops.EpochRegressions != 1 {
		t.Fatalf("regressions %d, want 1", r.Ops.EpochRegressions)
	}
	// Other clients of n2 are other observers: the watch stream saw
	// epoch 2, the consistent reader only epoch 1, and neither went back.
	if len(r.Violations) != 1 {
		t.Fatalf("violations %q, want one", r.Violations)
	}
}

func TestOpsOverlappingLeases(t *testing.T) {
	recs := cleanOps()
	// n1's last answer says its lease runs 450 ms more: until at least
	// 900 + 450 = 1350 ms, after n2 answered with a lease of its own
	// from 1311 ms.
	for i := range recs {
		if recs[i].Node == "n1" && recs[i].Call == at(900) {
			recs[i].LeaseNS = int64(450 * time.Millisecond)
		}
	}
	r := checkRecs(t, recs)
	wantViolation(t, r, "two leases at once: n1 (epoch 1)")
	if r.Ops.LeaseOverlaps != 1 || r.Ops.Linearizable != "Ok" {
		t.Fatalf("overlaps %d, linearizable %s; want 1 and Ok (the reads alone are in order)", r.Ops.LeaseOverlaps, r.Ops.Linearizable)
	}
	dir := t.TempDir()
	if err := r.Ops.writeVisual(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.Ops.Visual)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "n1 and n2 both hold a lease") {
		t.Fatal("the visualisation does not show the overlap")
	}
}

// A claim is only what is certain: an answer that took longer than its
// lease claims nothing, so a slow answer never makes a false alarm.
func TestOpsLeaseClaimIsConservative(t *testing.T) {
	recs := cleanOps()
	recs = append(recs, op("n1", opStatus, 1000, 1400, "leader", "n1", 1, 350))
	r := checkRecs(t, recs)
	if r.Ops.LeaseOverlaps != 0 {
		t.Fatalf("violations %q: the answer returned after call + lease and claims nothing", r.Violations)
	}
	claims := leaseClaims([]Record{op("n1", opStatus, 1000, 1100, "leader", "n1", 1, 350)})
	if len(claims) != 1 || claims[0].start != at(1100) || claims[0].end != at(1350) {
		t.Fatalf("claim %+v, want [1100, 1350] ms", claims)
	}
}

func TestOpsConsistentReadNotLinearizable(t *testing.T) {
	recs := cleanOps()
	// After n2's confirmed read of epoch 2 returned (1325 ms), a new
	// consistent read of n1 says n1 still leads epoch 1. Its lease is too
	// short to claim anything and its own client never saw epoch 2: only
	// the linearizability check can see it.
	recs = append(recs, op("n1", opConsistent, 1500, 1510, "leader", "n1", 1, 5))
	r := checkRecs(t, recs)
	if r.Ops.Linearizable != "Illegal" {
		t.Fatalf("linearizable %s, want Illegal", r.Ops.Linearizable)
	}
	wantViolation(t, r, "not linearizable")
	if r.Ops.LeaseOverlaps != 0 || r.Ops.EpochRegressions != 0 {
		t.Fatalf("report %+v: only porcupine should object", r.Ops)
	}
	if err := r.Ops.writeVisual(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Ops.Visual); err != nil {
		t.Fatal(err)
	}
}

// The check runs segment by segment; a read that goes back across a
// segment boundary must still be caught, so the state is carried over.
func TestOpsSegmentsCarryState(t *testing.T) {
	var recs []Record
	for i := range 3 * segmentOps {
		epoch := uint64(1 + i/segmentOps)
		recs = append(recs, op("n1", opStatus, 10*i, 10*i+1, "leader", "n1", epoch, 2))
	}
	r := checkRecs(t, recs)
	if r.Ops.Linearizable != "Ok" || r.Ops.Segments < 3 {
		t.Fatalf("report %+v, want Ok in at least 3 segments", r.Ops)
	}
	// Another client of n1 reads epoch 1 at the very end.
	recs = append(recs, op("n1", opConsistent, 30*segmentOps, 30*segmentOps+1, "leader", "n1", 1, 0))
	r = checkRecs(t, recs)
	if r.Ops.Linearizable != "Illegal" {
		t.Fatalf("linearizable %s, want Illegal", r.Ops.Linearizable)
	}
}

func sched(node, ev string, call, ret int, epoch uint64, result string) Record {
	return Record{T: at(ret), Kind: kindSched, Node: node, Ev: ev, Epoch: epoch, Result: result, Call: at(call), Ret: at(ret)}
}

// fencedOps: n1 raises to 1 and writes; n2 raises to 2 while n1 writes
// concurrently (either order is fine); n1's next write is refused; a raise
// that failed with an unknown outcome is placed wherever it fits (here
// last: n2 still writes at 2 after it).
func fencedOps() []Record {
	return []Record{
		sched("n1", "raise", 0, 5, 1, "accepted"),
		sched("n1", "write", 1000, 1010, 1, "accepted"),
		sched("n2", "raise", 1500, 1520, 2, "accepted"),
		sched("n1", "write", 1505, 1530, 1, "accepted"),
		sched("n1", "write", 2000, 2010, 1, "stale"),
		sched("n3", "raise", 2100, 2400, 3, "error"),
		sched("n4", "write", 2500, 2510, 4, "not_raised"),
		sched("n2", "write", 2600, 2610, 2, "duplicate"),
	}
}

func TestFenceRegister(t *testing.T) {
	r := checkRecs(t, fencedOps())
	checkFence(fencedOps(), r)
	if len(r.Violations) != 0 || r.Ops.FenceLinearizable != "Ok" || r.Ops.FenceOps != 8 {
		t.Fatalf("violations %q, report %+v", r.Violations, r.Ops)
	}
	// n1's write in epoch 1 is accepted although n2's raise to 2 had
	// returned before it began.
	bad := append(fencedOps(), sched("n1", "write", 1600, 1610, 1, "accepted"))
	r = &Report{}
	checkFence(bad, r)
	if r.Ops.FenceLinearizable != "Illegal" {
		t.Fatalf("fence register %q, want Illegal", r.Ops.FenceLinearizable)
	}
	wantViolation(t, r, "not linearizable against the fence table")
	if err := r.Ops.writeVisual(t.TempDir()); err != nil || r.Ops.FenceVisual == "" {
		t.Fatalf("visualisation %q: %v", r.Ops.FenceVisual, err)
	}
	// A control run has no raises: nothing to check.
	r = &Report{}
	checkFence([]Record{sched("n1", "write", 0, 1, 1, "accepted"), sched("n2", "write", 2, 3, 0, "accepted")}, r)
	if r.Ops.FenceLinearizable != "" {
		t.Fatalf("fence register checked without raises: %q", r.Ops.FenceLinearizable)
	}
}
