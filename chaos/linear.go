package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checks of the clients' operations (kind "op"): what a local process
// asking an agent's socket was told, timed by the harness.
//
//   - Linearizable leadership (porcupine): every answer in which an agent
//     says it leads — a status read with a valid lease, or a consistent
//     read confirmed by a quorum — is a read of one register (epoch,
//     leader) that only elections write. It must be linearizable: some
//     order of the reads, each placed between its call and its return,
//     sees epochs that never go back and one leader per epoch. A
//     follower's answer is not in it: a follower may lag, and says so.
//   - One leader per epoch (plain): no two agents ever answer "leader" in
//     the same epoch, whatever the request (watch events too).
//   - Epochs never go back per observer (plain): each client (one agent's
//     status poller, consistent reader or watch stream) sees epochs in
//     order, across the agent's restarts.
//   - Leases never overlap (plain intervals): see leaseClaims.

// leaderRead is a porcupine input: who was asked, and how.
type leaderRead struct {
	Node string
	Op   string
}

// leadState is the leadership register: the newest epoch and its leader.
// It is also a read's output.
type leadState struct {
	Epoch  uint64
	Leader string
}

// leadershipModel returns the register's model, starting at init.
func leadershipModel(init leadState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, _, output any) (bool, any) {
			s, o := state.(leadState), output.(leadState)
			switch {
			case o.Epoch > s.Epoch:
				return true, o
			case o.Epoch == s.Epoch && (o.Leader == s.Leader || s.Leader == ""):
				return true, o
			}
			return false, s
		},
		DescribeOperation: func(input, output any) string {
			in, o := input.(leaderRead), output.(leadState)
			return fmt.Sprintf("%s %s: %s leads epoch %d", in.Node, in.Op, o.Leader, o.Epoch)
		},
		DescribeState: func(state any) string {
			s := state.(leadState)
			if s.Leader == "" {
				return "no leader seen yet"
			}
			return fmt.Sprintf("epoch %d led by %s", s.Epoch, s.Leader)
		},
	}
}

// segmentOps is how many operations porcupine checks at once at least
// (more until a quiescent point): the register's state at a point where
// no read is in flight is fixed — the newest epoch read before it, with
// its leader — so the history is checked segment by segment, each from
// the state the previous one ends in, and its cost stays linear.
const segmentOps = 400

// porcupineTimeout bounds one segment's check (Unknown past it).
const porcupineTimeout = 30 * time.Second

// OpsReport is what the operation checks found.
type OpsReport struct {
	Ops         int // requests answered (and watch events)
	OpsFailed   int // requests that timed out or were refused
	LeaderReads int // answers saying "I lead" checked for linearizability
	Consistent  int // consistent reads answered by a confirmed leader
	Segments    int
	// Linearizable is porcupine's verdict over every segment: Ok,
	// Illegal, or Unknown (a segment timed out and nothing was illegal).
	Linearizable  string
	LeaseClaims   int // answers with a lease that certainly covers some interval
	LeaseOverlaps int
	// LeaseGapMin is the shortest time between the end of one agent's
	// claim and the start of another's (-1 when no agent followed
	// another): how close the leases came to overlapping.
	LeaseGapMin      time.Duration
	EpochRegressions int
	TwoLeaders       int
	// FenceOps raises and writes were checked against the fence table's
	// register (fencereg.go): FenceLinearizable is porcupine's verdict,
	// "" when the run had no raises.
	FenceOps          int
	FenceLinearizable string
	// Visual is the HTML file written for the first violation of the
	// leadership checks ("" when none): visualFile in the run's folder.
	// FenceVisual likewise for the fence register.
	Visual      string
	FenceVisual string

	vis      *visual
	fenceVis *visual
	firstAt  int64 // when the first violation happened (0: none)
}

// visual is what Visualize needs for the first violation.
type visual struct {
	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// Names of the HTML visualisations in a run's folder.
const (
	visualFile      = "linearizability.html"
	fenceVisualFile = "fence-linearizability.html"
)

type leaseClaim struct {
	node       string
	epoch      uint64
	start, end int64
}

// leaseClaims turns leader answers into the intervals over which each
// agent certainly claimed a valid lease. An answer with role leader and
// lease_ns L was computed at some agent instant a in [call, ret], and says
// the lease runs until a + L: the agent claims [a, a+L]. Whatever a was,
// that covers [ret, call+L] (empty when L < ret − call): the claim is
// taken from the answer's return to the call plus L, never more. The
// agents measure L on the harness's kernel's monotonic clock, so no drift
// enters. Two agents' claims that overlap are two leases at once: a
// client of each could act as sole leader at the same instant. Watch
// events are not claims: nothing bounds when they were computed.
func leaseClaims(ops []Record) []leaseClaim {
	var out []leaseClaim
	for _, x := range ops {
		if x.Up && x.Role == "leader" && x.Op != opWatch && x.LeaseNS > 0 && x.Call+x.LeaseNS > x.Ret {
			out = append(out, leaseClaim{node: x.Node, epoch: x.Epoch, start: x.Ret, end: x.Call + x.LeaseNS})
		}
	}
	return out
}

// mergeClaims joins each agent's overlapping claims, so that an overlap
// between two agents is reported once per stretch of leadership.
func mergeClaims(claims []leaseClaim) []leaseClaim {
	sorted := append([]leaseClaim(nil), claims...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].node != sorted[j].node {
			return sorted[i].node < sorted[j].node
		}
		return sorted[i].start < sorted[j].start
	})
	var out []leaseClaim
	for _, c := range sorted {
		if n := len(out); n > 0 && out[n-1].node == c.node && c.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, c.end)
			out[n-1].epoch = max(out[n-1].epoch, c.epoch)
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// closestLeases is the shortest gap from one agent's claim (merged, sorted
// by start) to a later claim of another agent; -1 when there is none.
func closestLeases(merged []leaseClaim) time.Duration {
	best := time.Duration(-1)
	lastEnd := map[string]int64{}
	for _, c := range merged {
		for node, end := range lastEnd {
			if node != c.node && c.start >= end {
				if g := time.Duration(c.start - end); best < 0 || g < best {
					best = g
				}
			}
		}
		lastEnd[c.node] = max(lastEnd[c.node], c.end)
	}
	return best
}

// checkOps runs the operation checks over the op records of a history
// (sorted by time) and adds what they find to r.
func checkOps(recs []Record, r *Report) {
	o := &r.Ops
	violate := func(at int64, format string, args ...any) {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
		if o.firstAt == 0 {
			o.firstAt = at
		}
	}
	var ops []Record
	for _, x := range recs {
		if x.Kind != kindOp {
			continue
		}
		if !x.Up {
			o.OpsFailed++
			continue
		}
		o.Ops++
		ops = append(ops, x)
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })

	// One leader per epoch, and epochs per observer.
	leaderOf := map[uint64]string{}
	seen := map[string]Record{}
	for _, x := range ops {
		if x.Role == "leader" {
			if prev, ok := leaderOf[x.Epoch]; ok && prev != x.Node {
				o.TwoLeaders++
				violate(x.Ret, "two leaders in epoch %d: %s and %s answered leader (%s %s at %s)", x.Epoch, prev, x.Node, x.Obs, x.Op, stamp(x.Ret))
			} else if !ok {
				leaderOf[x.Epoch] = x.Node
			}
		}
		if p, ok := seen[x.Obs]; ok && x.Epoch < p.Epoch {
			o.EpochRegressions++
			violate(x.Ret, "%s saw the epoch go back from %d to %d (at %s)", x.Obs, p.Epoch, x.Epoch, stamp(x.Ret))
		}
		if p, ok := seen[x.Obs]; !ok || x.Epoch >= p.Epoch {
			seen[x.Obs] = x
		}
	}

	// Leases.
	claims := leaseClaims(ops)
	o.LeaseClaims = len(claims)
	merged := mergeClaims(claims)
	var overlaps [][2]leaseClaim
	for i, a := range merged {
		for _, b := range merged[i+1:] {
			if b.start >= a.end {
				break
			}
			if b.node != a.node {
				overlaps = append(overlaps, [2]leaseClaim{a, b})
			}
		}
	}
	o.LeaseOverlaps = len(overlaps)
	o.LeaseGapMin = closestLeases(merged)
	for _, p := range overlaps {
		a, b := p[0], p[1]
		violate(b.start, "two leases at once: %s (epoch %d) claimed a lease until %s, %s (epoch %d) claimed one from %s: %s of overlap",
			a.node, a.epoch, stamp(a.end), b.node, b.epoch, stamp(b.start), time.Duration(min(a.end, b.end)-b.start).Round(time.Millisecond))
	}

	// Linearizable leadership, segment by segment.
	var reads []porcupine.Operation
	clients := map[string]int{}
	for _, x := range ops {
		if x.Role != "leader" || x.Op == opWatch {
			continue
		}
		if x.Op == opConsistent {
			o.Consistent++
		}
		id, ok := clients[x.Obs]
		if !ok {
			id = len(clients)
			clients[x.Obs] = id
		}
		leader := x.Leader
		if leader == "" {
			leader = x.Node
		}
		reads = append(reads, porcupine.Operation{ClientId: id, Input: leaderRead{x.Node, x.Op}, Output: leadState{x.Epoch, leader}, Call: x.Call, Return: x.Ret})
	}
	o.LeaderReads = len(reads)
	o.Linearizable = string(porcupine.Ok)
	var state leadState
	for _, seg := range segments(reads, segmentOps) {
		o.Segments++
		model := leadershipModel(state)
		res, info := porcupine.CheckOperationsVerbose(model, seg, porcupineTimeout)
		switch res {
		case porcupine.Illegal:
			o.Linearizable = string(porcupine.Illegal)
			first, last := seg[0].Call, seg[len(seg)-1].Return
			violate(first, "leader reads between %s and %s are not linearizable (porcupine: %s)", stamp(first), stamp(last), visualFile)
			if o.vis == nil {
				o.vis = &visual{model: model, info: info}
				annotate(&o.vis.info, merged, overlaps, first, last)
			}
		case porcupine.Unknown:
			if o.Linearizable == string(porcupine.Ok) {
				o.Linearizable = string(porcupine.Unknown)
			}
		}
		state = endState(state, seg)
	}

	// A violation porcupine did not see (leases, an observer): show the
	// leader reads around it, with the lease claims.
	if o.vis == nil && o.firstAt != 0 {
		from, to := o.firstAt-int64(time.Second), o.firstAt+int64(time.Second)/2
		var before, window []porcupine.Operation
		for _, seg := range segments(reads, 1) {
			switch {
			case seg[len(seg)-1].Return < from:
				before = append(before, seg...)
			case seg[0].Call <= to:
				window = append(window, seg...)
			}
		}
		model := leadershipModel(endState(leadState{}, before))
		_, info := porcupine.CheckOperationsVerbose(model, window, porcupineTimeout)
		o.vis = &visual{model: model, info: info}
		annotate(&o.vis.info, merged, overlaps, from, to)
	}
}

// segments cuts ops (sorted by call) at quiescent points — where every
// earlier operation returned before the next one was called — into runs
// of at least n operations (the last may be shorter).
func segments(ops []porcupine.Operation, n int) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	start := 0
	var maxRet int64
	for i, op := range ops {
		if i > start && i-start >= n && op.Call > maxRet {
			out = append(out, ops[start:i])
			start = i
		}
		maxRet = max(maxRet, op.Return)
	}
	if start < len(ops) {
		out = append(out, ops[start:])
	}
	return out
}

// endState is the register after a linearizable segment that started in
// s: its newest epoch and that epoch's leader (epochs never go back in a
// linearization, so the last read is one of the newest epoch).
func endState(s leadState, seg []porcupine.Operation) leadState {
	for _, op := range seg {
		if o := op.Output.(leadState); o.Epoch > s.Epoch || s.Leader == "" {
			s = o
		}
	}
	return s
}

// annotate adds the lease claims between from and to (each agent's
// merged claims in a row of its own, overlaps in red) to a visualisation.
func annotate(info *porcupine.LinearizationInfo, claims []leaseClaim, overlaps [][2]leaseClaim, from, to int64) {
	var anns []porcupine.Annotation
	for _, c := range claims {
		if c.end < from || c.start > to {
			continue
		}
		anns = append(anns, porcupine.Annotation{
			Tag:         "lease " + c.node,
			Start:       c.start,
			End:         c.end,
			Description: fmt.Sprintf("%s lease, epoch %d", c.node, c.epoch),
			Details:     fmt.Sprintf("certainly claimed from %s to %s", stamp(c.start), stamp(c.end)),
		})
	}
	for _, p := range overlaps {
		a, b := p[0], p[1]
		if b.start > to || min(a.end, b.end) < from {
			continue
		}
		anns = append(anns, porcupine.Annotation{
			Tag:             "violations",
			Start:           b.start,
			End:             min(a.end, b.end),
			Description:     fmt.Sprintf("%s and %s both hold a lease", a.node, b.node),
			Details:         fmt.Sprintf("%s (epoch %d) until %s; %s (epoch %d) from %s", a.node, a.epoch, stamp(a.end), b.node, b.epoch, stamp(b.start)),
			TextColor:       "#ffffff",
			BackgroundColor: "#c0392b",
		})
	}
	info.AddAnnotations(anns)
}

// writeVisual writes the HTML visualisations of the first violations, if
// any, into dir.
func (o *OpsReport) writeVisual(dir string) error {
	for _, v := range []struct {
		vis  *visual
		name string
		path *string
	}{{o.vis, visualFile, &o.Visual}, {o.fenceVis, fenceVisualFile, &o.FenceVisual}} {
		if v.vis == nil {
			continue
		}
		path := filepath.Join(dir, v.name)
		if err := porcupine.VisualizePath(v.vis.model, v.vis.info, path); err != nil {
			return fmt.Errorf("chaos: write the visualisation %s: %w", path, err)
		}
		*v.path = path
	}
	return nil
}
