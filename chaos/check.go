package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite"
)

// JobRow is one row of the scheduler's jobs table, in insertion order.
type JobRow struct {
	Seq      int64
	Schedule string
	Tick     int64
	Epoch    uint64
	Node     string
}

// ReadJobs reads the jobs table and the fence table's epoch.
func ReadJobs(ctx context.Context, path string) ([]JobRow, uint64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, 0, fmt.Errorf("open jobs db: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT seq, schedule, tick, epoch, node FROM jobs ORDER BY seq")
	if err != nil {
		return nil, 0, fmt.Errorf("read jobs: %w", err)
	}
	defer rows.Close()
	var out []JobRow
	for rows.Next() {
		var j JobRow
		if err := rows.Scan(&j.Seq, &j.Schedule, &j.Tick, &j.Epoch, &j.Node); err != nil {
			return nil, 0, fmt.Errorf("read jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read jobs: %w", err)
	}
	var fenceEpoch uint64
	// The fence table exists once any replica started; a missing one is
	// not an error for the checker.
	_ = db.QueryRowContext(ctx, "SELECT epoch FROM fence_epoch WHERE id = 1").Scan(&fenceEpoch)
	return out, fenceEpoch, nil
}

// Durations summarises measured times (never asserted).
type Durations []time.Duration

// Median returns the median (0 if empty).
func (d Durations) Median() time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append(Durations(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// Max returns the largest (0 if empty).
func (d Durations) Max() time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}

// Report is what the checker found in one run.
type Report struct {
	Rounds    int
	Faults    map[string]int
	Elections int // distinct epochs in which some agent reported itself leader

	WritesAttempted int
	WritesAccepted  int
	WritesStale     int // refused by the fence (epoch lower than the table's)
	WritesNotRaised int
	Collisions      int // UNIQUE (schedule, tick) refused a second job for a tick
	WritesError     int
	Raises          int
	RaisesStale     int

	Jobs          int
	StaleAccepted int // rows whose epoch is below an earlier row's: a stale leader's write went through
	Duplicates    int // extra rows for a (schedule, tick) that already had one
	FenceEpoch    uint64

	// FailoverTime: from a fault on the leader to a leader in a higher
	// epoch. RecoveryTime: from a heal to some agent leading. By fault kind.
	FailoverTime map[string]Durations
	RecoveryTime map[string]Durations
	// ConvergeTime: from a heal to every agent answering and naming the
	// same leader in the same epoch. NotConverged counts heals after which
	// that did not happen before the next fault (or the end).
	ConvergeTime map[string]Durations
	NotConverged map[string]int

	// Freeze: what the frozen scheduler's first write on waking became
	// ("" when it wrote nothing).
	FreezeFirstWrite []string

	// Ops: the clients' requests and their checks (linear.go).
	Ops OpsReport

	Violations []string
}

// Check runs every invariant over the history and the jobs table. bound is
// the liveness bound after a heal.
func Check(recs []Record, jobs []JobRow, fenceEpoch uint64, bound time.Duration) *Report {
	r := &Report{Faults: map[string]int{}, FailoverTime: map[string]Durations{}, RecoveryTime: map[string]Durations{}, ConvergeTime: map[string]Durations{}, NotConverged: map[string]int{}, FenceEpoch: fenceEpoch}
	violate := func(format string, args ...any) {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}

	// 1. At most one leader per epoch; 2. epochs never go back at any
	// agent (status and hard state, across restarts); 3. one vote per term.
	leaderOf := map[uint64]string{}
	lastEpoch := map[string]uint64{}
	type hs struct{ term, vote, epoch uint64 }
	lastHS := map[string]hs{}
	for _, x := range recs {
		switch x.Kind {
		case kindStatus:
			if !x.Up {
				continue
			}
			if x.Role == "leader" {
				if prev, ok := leaderOf[x.Epoch]; ok && prev != x.Node {
					violate("two leaders in epoch %d: %s and %s (at %s)", x.Epoch, prev, x.Node, stamp(x.T))
				} else if !ok {
					leaderOf[x.Epoch] = x.Node
				}
			}
			if x.Epoch < lastEpoch[x.Node] {
				violate("%s: epoch went back from %d to %d (at %s)", x.Node, lastEpoch[x.Node], x.Epoch, stamp(x.T))
			}
			lastEpoch[x.Node] = max(lastEpoch[x.Node], x.Epoch)
		case kindHardState:
			p, seen := lastHS[x.Node]
			if seen {
				if x.Term < p.term {
					violate("%s: hard state term went back from %d to %d", x.Node, p.term, x.Term)
				}
				if x.Epoch < p.epoch {
					violate("%s: hard state epoch went back from %d to %d", x.Node, p.epoch, x.Epoch)
				}
				if x.Term == p.term && p.vote != 0 && x.Vote != p.vote {
					violate("%s: voted twice in term %d: for %d, then for %d", x.Node, x.Term, p.vote, x.Vote)
				}
			}
			lastHS[x.Node] = hs{x.Term, x.Vote, x.Epoch}
		}
	}
	r.Elections = len(leaderOf)

	// 7. A key rotation moves no leadership: between its fault and heal
	// records, no agent reports an epoch above the one at its start.
	var rotating *Record
	for i, x := range recs {
		switch {
		case x.Kind == kindFault && x.Fault == rotateKey:
			rotating = &recs[i]
		case x.Kind == kindHeal && rotating != nil && x.Round == rotating.Round:
			rotating = nil
		case x.Kind == kindStatus && rotating != nil && x.Up && x.Epoch > rotating.Epoch:
			violate("leadership moved during the key rotation of round %d: %s reports epoch %d (leader %q), above %d at its start (at %s)",
				rotating.Round, x.Node, x.Epoch, x.Leader, rotating.Epoch, stamp(x.T))
			rotating = nil // one line per rotation
		}
	}

	// 4. Writes as the schedulers saw them.
	for _, x := range recs {
		if x.Kind != kindSched {
			continue
		}
		switch x.Ev {
		case "write":
			r.WritesAttempted++
			switch x.Result {
			case "accepted":
				r.WritesAccepted++
			case "stale":
				r.WritesStale++
			case "not_raised":
				r.WritesNotRaised++
			case "duplicate":
				r.Collisions++
			default:
				r.WritesError++
			}
		case "raise":
			r.Raises++
			if x.Result == "stale" {
				r.RaisesStale++
			}
		}
	}

	// 5. The fenced table: never a lower epoch after a higher one, never
	// two jobs for one tick.
	r.Jobs = len(jobs)
	var high uint64
	perTick := map[string]int{}
	for _, j := range jobs {
		if j.Epoch < high {
			r.StaleAccepted++
			if r.StaleAccepted <= 5 {
				violate("stale write accepted: job seq %d tick %d from %s in epoch %d after epoch %d", j.Seq, j.Tick, j.Node, j.Epoch, high)
			}
		}
		high = max(high, j.Epoch)
		key := fmt.Sprintf("%s/%d", j.Schedule, j.Tick)
		perTick[key]++
		if perTick[key] == 2 {
			violate("duplicate job %s (second row seq %d from %s, epoch %d)", key, j.Seq, j.Node, j.Epoch)
		}
		if perTick[key] > 1 {
			r.Duplicates++
		}
	}
	if r.StaleAccepted > 5 {
		violate("… %d stale writes accepted in all", r.StaleAccepted)
	}

	// 6. Liveness after every heal, and the measured times.
	type st struct {
		up, leader bool
		epoch      uint64
		named      string
	}
	cur := map[string]st{}
	type pending struct {
		kind   string
		from   time.Time
		epoch  uint64
		isHeal bool
	}
	type convergeWait struct {
		kind string
		from time.Time
	}
	var converging []convergeWait
	nodes := map[string]bool{}
	for _, x := range recs {
		if x.Kind == kindStatus {
			nodes[x.Node] = true
		}
	}
	converged := func() bool {
		var name string
		var epoch uint64
		for n := range nodes {
			s, ok := cur[n]
			if !ok || !s.up || s.named == "" {
				return false
			}
			if name == "" {
				name, epoch = s.named, s.epoch
			} else if s.named != name || s.epoch != epoch {
				return false
			}
		}
		return name != ""
	}
	var waits []pending
	freezeWake := map[string]time.Time{}
	var newestLeader uint64
	rounds := map[int]bool{}
	leaderNow := func() (bool, uint64) {
		var best uint64
		found := false
		for _, s := range cur {
			if s.up && s.leader {
				found = true
				best = max(best, s.epoch)
			}
		}
		return found, best
	}
	resolve := func(at time.Time) {
		ok, e := leaderNow()
		if !ok {
			return
		}
		kept := waits[:0]
		for _, w := range waits {
			switch {
			case w.isHeal:
				r.RecoveryTime[w.kind] = append(r.RecoveryTime[w.kind], at.Sub(w.from))
			case e > w.epoch:
				r.FailoverTime[w.kind] = append(r.FailoverTime[w.kind], at.Sub(w.from))
			default:
				kept = append(kept, w)
			}
		}
		waits = kept
	}
	for _, x := range recs {
		at := time.Unix(0, x.T)
		switch x.Kind {
		case kindStatus:
			cur[x.Node] = st{up: x.Up, leader: x.Up && x.Role == "leader", epoch: x.Epoch, named: x.Leader}
			if x.Up && x.Role == "leader" {
				newestLeader = max(newestLeader, x.Epoch)
			}
			resolve(at)
			if len(converging) > 0 && converged() {
				for _, c := range converging {
					r.ConvergeTime[c.kind] = append(r.ConvergeTime[c.kind], at.Sub(c.from))
				}
				converging = nil
			}
		case kindFault:
			for _, c := range converging {
				r.NotConverged[c.kind]++
			}
			converging = nil
			r.Faults[x.Fault]++
			rounds[x.Round] = true
			// A failover not seen before the next fault is not measured.
			kept := waits[:0]
			for _, w := range waits {
				if w.isHeal {
					kept = append(kept, w)
				}
			}
			waits = kept
			if x.LeaderHit {
				waits = append(waits, pending{kind: x.Fault, from: at, epoch: x.Epoch})
			}
		case kindHeal:
			waits = append(waits, pending{kind: x.Fault, from: at, isHeal: true})
			resolve(at)
			if converged() {
				r.ConvergeTime[x.Fault] = append(r.ConvergeTime[x.Fault], 0)
			} else {
				converging = append(converging, convergeWait{x.Fault, at})
			}
		case kindWake:
			freezeWake[x.Node] = at
		case kindSched:
			if w, ok := freezeWake[x.Node]; ok && x.Ev == "write" && !at.Before(w) {
				res := x.Result
				if res == "accepted" {
					if x.Epoch < newestLeader {
						violate("%s: the frozen scheduler's first write on waking was accepted in epoch %d after a leader in epoch %d (tick %d)", x.Node, x.Epoch, newestLeader, x.Tick)
					} else {
						// Nobody was elected while it slept (no majority
						// left): its epoch is still the newest, and the
						// write is not stale.
						res = "accepted, no newer leader yet"
					}
				}
				r.FreezeFirstWrite = append(r.FreezeFirstWrite, res)
				delete(freezeWake, x.Node)
			}
		}
	}
	for _, c := range converging {
		r.NotConverged[c.kind]++
	}
	for range freezeWake {
		r.FreezeFirstWrite = append(r.FreezeFirstWrite, "")
	}
	r.Rounds = len(rounds)
	for kind, ds := range r.RecoveryTime {
		for _, d := range ds {
			if d > bound {
				violate("%s: no leader until %s after the heal (bound %s)", kind, d.Round(time.Millisecond), bound)
			}
		}
	}
	for _, w := range waits {
		if w.isHeal {
			violate("%s: no leader after the heal at %s (the run ended first)", w.kind, stamp(w.from.UnixNano()))
		}
	}
	checkOps(recs, r)
	checkFence(recs, r)
	return r
}

func stamp(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000") }

// Print writes the report for people.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "rounds %d, elections (epochs with a leader) %d\n", r.Rounds, r.Elections)
	var kinds []string
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		line := fmt.Sprintf("  %-18s ×%-4d", k, r.Faults[k])
		if d := r.FailoverTime[k]; len(d) > 0 {
			line += fmt.Sprintf("  fault→new leader median %-8s worst %-8s", d.Median().Round(time.Millisecond), d.Max().Round(time.Millisecond))
		}
		if d := r.RecoveryTime[k]; len(d) > 0 {
			line += fmt.Sprintf("  heal→leader median %-8s worst %s", d.Median().Round(time.Millisecond), d.Max().Round(time.Millisecond))
		}
		fmt.Fprintln(w, line)
		if d := r.ConvergeTime[k]; len(d) > 0 || r.NotConverged[k] > 0 {
			fmt.Fprintf(w, "  %-18s        heal→all agents agree median %-8s worst %-8s not before the next fault: %d\n", "",
				d.Median().Round(time.Millisecond), d.Max().Round(time.Millisecond), r.NotConverged[k])
		}
	}
	fmt.Fprintf(w, "writes attempted %d: accepted %d, rejected as stale %d, not raised %d, UNIQUE collisions %d, errors %d\n",
		r.WritesAttempted, r.WritesAccepted, r.WritesStale, r.WritesNotRaised, r.Collisions, r.WritesError)
	fmt.Fprintf(w, "raises %d (refused as stale %d); fence epoch at the end %d\n", r.Raises, r.RaisesStale, r.FenceEpoch)
	fmt.Fprintf(w, "jobs %d: stale accepted %d, duplicates %d\n", r.Jobs, r.StaleAccepted, r.Duplicates)
	o := r.Ops
	fmt.Fprintf(w, "client ops %d answered, %d failed; leader reads %d (consistent %d) in %d segments: linearizable %s\n",
		o.Ops, o.OpsFailed, o.LeaderReads, o.Consistent, o.Segments, o.Linearizable)
	fmt.Fprintf(w, "lease claims %d: overlapping %d", o.LeaseClaims, o.LeaseOverlaps)
	if o.LeaseGapMin >= 0 {
		fmt.Fprintf(w, ", closest two agents' leases came %s apart", o.LeaseGapMin.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "; epoch regressions seen by a client %d; two leaders in an epoch %d\n", o.EpochRegressions, o.TwoLeaders)
	if o.FenceLinearizable != "" {
		fmt.Fprintf(w, "fence register: %d raises and writes, linearizable %s\n", o.FenceOps, o.FenceLinearizable)
	}
	for _, v := range []string{o.Visual, o.FenceVisual} {
		if v != "" {
			fmt.Fprintf(w, "visualisation of the first violation: %s (open it in a browser)\n", v)
		}
	}
	if len(r.FreezeFirstWrite) > 0 {
		fmt.Fprintf(w, "frozen scheduler's first write on waking: %s\n", strings.Join(quoteAll(r.FreezeFirstWrite), ", "))
	}
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "violations: none")
		return
	}
	fmt.Fprintf(w, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintln(w, "  "+v)
	}
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		if x == "" {
			x = "(no write)"
		}
		out[i] = x
	}
	return out
}
