package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/conclave-agent/conclave/config"
)

// Fault kinds. Process faults run everywhere; network faults need the
// namespaces (root, ip, iptables).
var (
	processFaults = []string{"kill-leader", "kill-follower", "kill-all", "pause-leader"}
	networkFaults = []string{"isolate-leader", "split", "bridge", "one-way", "random-loss"}
)

const freezeFault = "freeze-scheduler"

func isNetworkFault(kind string) bool {
	for _, k := range networkFaults {
		if k == kind {
			return true
		}
	}
	return false
}

// leader returns the node whose agent says it leads (highest epoch if
// several do), or nil.
func (h *harness) leader() *node {
	var best *node
	var bestEpoch uint64
	for _, n := range h.nodes {
		st, up := n.status()
		if up && st.IsLeader() && (best == nil || st.Epoch > bestEpoch) {
			best, bestEpoch = n, st.Epoch
		}
	}
	return best
}

func (h *harness) epoch() uint64 {
	var e uint64
	for _, n := range h.nodes {
		if st, up := n.status(); up {
			e = max(e, st.Epoch)
		}
	}
	return e
}

// waitLeader waits (up to the liveness bound) for an agent to lead.
func (h *harness) waitLeader(ctx context.Context) *node {
	deadline := time.Now().Add(h.opt.Bound)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if l := h.leader(); l != nil {
			return l
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return nil
}

func (h *harness) pick(xs []*node) *node { return xs[h.rng.IntN(len(xs))] }

func (h *harness) others(not *node) []*node {
	var out []*node
	for _, n := range h.nodes {
		if n != not {
			out = append(out, n)
		}
	}
	return out
}

func names(ns []*node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

// between returns a duration drawn uniformly from [lo, hi).
func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)))
}

// nemesis runs the rounds.
func (h *harness) nemesis(ctx context.Context) error {
	kinds := append([]string(nil), processFaults...)
	if h.net != nil {
		kinds = append(kinds, networkFaults...)
	}
	freezeRound := 0
	if h.opt.Freeze > 0 && len(h.opt.Schedule) == 0 {
		freezeRound = max(1, h.opt.Rounds/2)
	}
	if l := h.waitLeader(ctx); l == nil && ctx.Err() == nil {
		return fmt.Errorf("chaos: no leader within %s of the start (see %s/n*/log.txt)", h.opt.Bound, h.dir)
	}
	sleep(ctx, 2*time.Second) // let the first scheduler write
	for r := 1; r <= h.opt.Rounds && ctx.Err() == nil; r++ {
		var kind string
		switch {
		case len(h.opt.Schedule) > 0:
			kind = h.opt.Schedule[r-1]
		case r == freezeRound:
			kind = freezeFault
		default:
			kind = kinds[h.rng.IntN(len(kinds))]
		}
		if isNetworkFault(kind) && h.net == nil {
			h.logf("round %d: %s skipped (no network namespaces)", r, kind)
			continue
		}
		if err := h.round(ctx, r, kind); err != nil {
			return err
		}
		if h.waitLeader(ctx) == nil {
			h.logf("round %d: no leader within %s of the heal", r, h.opt.Bound)
		}
		sleep(ctx, h.between(time.Second, 2500*time.Millisecond))
	}
	h.waitLeader(ctx)
	sleep(ctx, 2*time.Second) // a few writes under the final leader
	return nil
}

// round injects one fault, holds it, heals it.
func (h *harness) round(ctx context.Context, r int, kind string) error {
	et := h.opt.ElectionTimeout
	if et <= 0 {
		et = config.Default().Election.ElectionTimeout.Std()
	}
	leader := h.leader()
	if leader == nil {
		leader = h.pick(h.nodes)
	}
	epoch := h.epoch()
	fault := func(targets []*node, detail string) {
		hit := false
		for _, t := range targets {
			hit = hit || t == leader
		}
		switch kind {
		case "kill-follower", "random-loss", "bridge", rotateKey:
			hit = false // the leader may lose, but need not
		case "one-way":
			hit = targets[0] == leader
		case "split":
			hit = leaderIn(leader, targets)
		}
		h.hist.Add(Record{Kind: kindFault, Round: r, Fault: kind, Targets: names(targets), Epoch: epoch, LeaderHit: hit, Detail: detail})
		h.logf("round %d: %s %v %s", r, kind, names(targets), detail)
	}
	heal := func() {
		h.hist.Add(Record{Kind: kindHeal, Round: r, Fault: kind})
	}
	switch kind {
	case "kill-leader", "kill-follower":
		target := leader
		if kind == "kill-follower" {
			target = h.pick(h.others(leader))
		}
		fault([]*node{target}, "SIGKILL")
		h.killAgent(target)
		sleep(ctx, h.between(time.Second, 4*time.Second))
		if err := h.startAgent(target); err != nil {
			return err
		}
		heal()
	case "kill-all":
		detail := "SIGKILL all agents"
		if h.net != nil {
			minority, majority := h.split(leader)
			if err := h.net.partition(ctx, names(minority), names(majority)); err != nil {
				return err
			}
			detail += fmt.Sprintf(" during a partition %v | %v", names(minority), names(majority))
		}
		fault(h.nodes, detail)
		for _, n := range h.nodes {
			n.mu.Lock()
			p := n.agent
			n.mu.Unlock()
			p.signal(syscall.SIGKILL)
		}
		for _, n := range h.nodes {
			h.killAgent(n)
		}
		sleep(ctx, h.between(500*time.Millisecond, 2*time.Second))
		for _, n := range h.nodes {
			if err := h.startAgent(n); err != nil {
				return err
			}
		}
		if h.net != nil {
			sleep(ctx, h.between(2*time.Second, 4*time.Second))
			if err := h.net.heal(ctx); err != nil {
				return err
			}
		}
		heal()
	case "pause-leader":
		// Longer than an election timeout plus the lease (one more
		// election timeout at most), so the others elect a new leader.
		hold := h.between(2*et+et/2, 4*et)
		fault([]*node{leader}, "SIGSTOP for "+hold.String())
		leader.mu.Lock()
		p := leader.agent
		leader.mu.Unlock()
		p.signal(syscall.SIGSTOP)
		sleep(ctx, hold)
		p.signal(syscall.SIGCONT)
		heal()
	case freezeFault:
		// The leader's host freezes: its agent and its scheduler. The
		// scheduler wakes first (its agent still frozen, so nothing can
		// tell it it was replaced) and acts at once on its old epoch.
		leader.mu.Lock()
		leader.schedHold = true
		sched, agent := leader.sched, leader.agent
		leader.mu.Unlock()
		fault([]*node{leader}, "SIGSTOP scheduler and agent for "+h.opt.Freeze.String())
		if !sched.exited() {
			sched.signal(syscall.SIGSTOP)
		}
		agent.signal(syscall.SIGSTOP)
		sleep(ctx, h.opt.Freeze)
		h.hist.Add(Record{Kind: kindWake, Node: leader.name, Round: r})
		sched.signal(syscall.SIGCONT)
		sleep(ctx, 1500*time.Millisecond)
		agent.signal(syscall.SIGCONT)
		leader.mu.Lock()
		leader.schedHold = false
		leader.mu.Unlock()
		heal()
	case "isolate-leader":
		fault([]*node{leader}, "")
		if err := h.net.partition(ctx, []string{leader.name}, names(h.others(leader))); err != nil {
			return err
		}
		sleep(ctx, h.between(3*time.Second, 6*time.Second))
		if err := h.net.heal(ctx); err != nil {
			return err
		}
		heal()
	case "split":
		minority, majority := h.split(leader)
		fault(minority, fmt.Sprintf("minority %v | majority %v", names(minority), names(majority)))
		if err := h.net.partition(ctx, names(minority), names(majority)); err != nil {
			return err
		}
		sleep(ctx, h.between(3*time.Second, 6*time.Second))
		if err := h.net.heal(ctx); err != nil {
			return err
		}
		heal()
	case "bridge":
		// Two halves that cannot hear each other, and one node that hears
		// both.
		order := h.rng.Perm(len(h.nodes))
		bridge := h.nodes[order[0]]
		var a, b []string
		for i, j := range order[1:] {
			if i%2 == 0 {
				a = append(a, h.nodes[j].name)
			} else {
				b = append(b, h.nodes[j].name)
			}
		}
		fault([]*node{bridge}, fmt.Sprintf("bridge %s between %v and %v", bridge.name, a, b))
		if err := h.net.partition(ctx, a, b); err != nil {
			return err
		}
		sleep(ctx, h.between(3*time.Second, 6*time.Second))
		if err := h.net.heal(ctx); err != nil {
			return err
		}
		heal()
	case "one-way":
		// target's packets to everyone are lost; it still hears them.
		target := leader
		if h.rng.IntN(2) == 0 {
			target = h.pick(h.nodes)
		}
		fault([]*node{target}, "outbound lost")
		for _, o := range h.others(target) {
			if err := h.net.drop(ctx, target.name, o.name); err != nil {
				return err
			}
		}
		sleep(ctx, h.between(3*time.Second, 6*time.Second))
		if err := h.net.heal(ctx); err != nil {
			return err
		}
		heal()
	case rotateKey:
		driver := h.pick(h.nodes)
		fault([]*node{driver}, "agent keys install, use, remove from "+driver.name)
		detail, err := h.rotate(ctx, driver)
		if err != nil {
			return err
		}
		h.logf("round %d: %s %s", r, kind, detail)
		heal()
	case "random-loss":
		p := 0.1 + 0.3*h.rng.Float64()
		fault(h.nodes, fmt.Sprintf("each agent drops %.0f%% of what it receives", 100*p))
		for _, n := range h.nodes {
			if err := h.net.loss(ctx, n.name, p); err != nil {
				return err
			}
		}
		sleep(ctx, h.between(3*time.Second, 6*time.Second))
		if err := h.net.heal(ctx); err != nil {
			return err
		}
		heal()
	default:
		return fmt.Errorf("chaos: unknown fault kind %q", kind)
	}
	return nil
}

func leaderIn(l *node, ns []*node) bool {
	for _, n := range ns {
		if n == l {
			return true
		}
	}
	return false
}

// split returns a random minority and majority; half the time the leader
// is in the minority.
func (h *harness) split(leader *node) (minority, majority []*node) {
	size := (len(h.nodes) - 1) / 2
	order := h.rng.Perm(len(h.nodes))
	if h.rng.IntN(2) == 0 {
		minority = append(minority, leader)
	}
	for _, i := range order {
		n := h.nodes[i]
		if n == leader && len(minority) > 0 && minority[0] == leader {
			continue
		}
		if len(minority) < size && n != leader {
			minority = append(minority, n)
		} else {
			majority = append(majority, n)
		}
	}
	return minority, majority
}
