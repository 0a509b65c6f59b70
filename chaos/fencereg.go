package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
)

// The fence table as the replicas saw it: one register, the table's epoch
// F, that raises move up and fenced writes only read. Every raise and
// write a replica reported (with the interval the scheduler timed around
// it) must be explainable by some order of them, each at one instant
// inside its interval:
//
//	raise(E)  accepted   F ≤ E, then F = E (a table already at E is fine)
//	          stale      F > E
//	          error      unknown: it may have taken effect at any time
//	                     after its call, or never (placed last)
//	write(E)  accepted   F = E
//	          duplicate  F = E (the fence passed, the UNIQUE key refused)
//	          stale      F > E
//	          not_raised F < E
//
// A write that failed otherwise changed nothing the fence decides and is
// left out. Runs without raises (the control run, whose replicas do not
// fence) have no such register and are not checked.

type fenceOp struct {
	Node   string
	Raise  bool
	Epoch  uint64
	Result string
}

var fenceModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, input, _ any) (bool, any) {
		f, in := state.(uint64), input.(fenceOp)
		if in.Raise {
			switch in.Result {
			case "accepted":
				return f <= in.Epoch, max(f, in.Epoch)
			case "stale":
				return f > in.Epoch, f
			}
			return true, max(f, in.Epoch) // error: it took effect here
		}
		switch in.Result {
		case "accepted", "duplicate":
			return f == in.Epoch, f
		case "stale":
			return f > in.Epoch, f
		case "not_raised":
			return f < in.Epoch, f
		}
		return true, f
	},
	DescribeOperation: func(input, _ any) string {
		in := input.(fenceOp)
		what := "write"
		if in.Raise {
			what = "raise"
		}
		return fmt.Sprintf("%s %s(%d) → %s", in.Node, what, in.Epoch, in.Result)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("fence epoch %d", state.(uint64)) },
}

// checkFence checks the replicas' raises and writes against fenceModel.
func checkFence(recs []Record, r *Report) {
	var ops []porcupine.Operation
	raises := 0
	clients := map[string]int{}
	for _, x := range recs {
		if x.Kind != kindSched || x.Call == 0 || (x.Ev != "raise" && x.Ev != "write") {
			continue
		}
		in := fenceOp{Node: x.Node, Raise: x.Ev == "raise", Epoch: x.Epoch, Result: x.Result}
		ret := x.Ret
		switch {
		case in.Raise:
			raises++
			if x.Result != "accepted" && x.Result != "stale" {
				ret = math.MaxInt64 // unknown: may take effect at any later time
			}
		case x.Result != "accepted" && x.Result != "duplicate" && x.Result != "stale" && x.Result != "not_raised":
			continue
		}
		id, ok := clients[x.Node]
		if !ok {
			id = len(clients)
			clients[x.Node] = id
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: in, Output: nil, Call: x.Call, Return: ret})
	}
	if raises == 0 {
		return
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	r.Ops.FenceOps = len(ops)
	res, info := porcupine.CheckOperationsVerbose(fenceModel, ops, porcupineTimeout)
	r.Ops.FenceLinearizable = string(res)
	if res == porcupine.Illegal {
		r.Violations = append(r.Violations, "the replicas' raises and writes are not linearizable against the fence table ("+fenceVisualFile+")")
		r.Ops.fenceVis = &visual{model: fenceModel, info: info}
	}
}
