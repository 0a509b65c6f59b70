package main

import (
	"context"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// opRecord is one client request and its answer (err nil) or failure.
func opRecord(node, op, obs string, call, ret int64, st api.Status, err error) Record {
	r := Record{T: call, Kind: kindOp, Node: node, Op: op, Obs: obs, Call: call, Ret: ret, Up: err == nil}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Role, r.Leader, r.Epoch, r.LeaseNS = st.Role, st.Leader, st.Epoch, st.LeaseNS
	return r
}

// readConsistent asks n for a consistent read (GET /v1/status?consistent)
// every ConsistentEvery, one at a time, and records each as an op. A
// leader answers after a quorum has confirmed it; a follower answers at
// once with what it knows.
func (h *harness) readConsistent(ctx context.Context, n *node) {
	defer h.wg.Done()
	every := h.opt.ConsistentEvery
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// One election timeout at most is spent confirming (the agent's
		// own bound); a second covers a loaded machine.
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		call := h.clock.now()
		st, err := n.c.ConsistentStatus(qctx)
		ret := h.clock.now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.hist.Add(opRecord(n.name, opConsistent, n.name+"/"+opConsistent, call, ret, st, err))
	}
}

// watch follows n's /v1/watch stream, opening it again whenever it ends
// (the agent restarts, lags it out), and records every event as an op
// whose call and return are both the moment it arrived: an event has no
// request to time, so it is used for the per-observer and per-epoch
// checks, never as a lease claim or a linearizable read.
func (h *harness) watch(ctx context.Context, n *node) {
	defer h.wg.Done()
	obs := n.name + "/" + opWatch
	for ctx.Err() == nil {
		w, err := n.c.Watch(ctx)
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		for {
			st, err := w.Next()
			if err != nil {
				break
			}
			at := h.clock.now()
			h.hist.Add(opRecord(n.name, opWatch, obs, at, at, st, nil))
		}
		_ = w.Close()
		sleep(ctx, 200*time.Millisecond)
	}
}
