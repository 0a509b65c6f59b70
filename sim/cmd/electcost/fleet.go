package main

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/sim"
)

// Gossip model of the observers' path (protocols/observe): memberlist's
// defaults for the agent's lan profile. Every member gossips every
// gossipInterval, at its own phase, to gossipFanout random other members,
// piggybacking what it has queued; a queued announcement goes out
// retransmitMult·⌈log10(N+1)⌉ times in all (once per target), and a member
// that hears a newer announcement queues it in turn.
const (
	gossipInterval = 200 * time.Millisecond
	gossipFanout   = 3
	retransmitMult = 4
)

// spread is one run of the gossip model.
type spread struct {
	// all is when the last member learned the announcement (from the new
	// leader queueing it); reached counts the members that did.
	all     time.Duration
	reached int
	// packets is the number of transmissions, all members together.
	packets int64
}

// gossipEvent is a member's gossip tick (to < 0) or a delivery to member to.
type gossipEvent struct {
	at       time.Duration
	from, to int
}

type gossipQueue []gossipEvent

func (q gossipQueue) Len() int           { return len(q) }
func (q gossipQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q gossipQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *gossipQueue) Push(x any)        { *q = append(*q, x.(gossipEvent)) }
func (q *gossipQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simulateSpread spreads one announcement from member 0 to n members with
// one-way delays in [minDelay, maxDelay].
func simulateSpread(n int, seed uint64, minDelay, maxDelay time.Duration) spread {
	rng := rand.New(rand.NewPCG(seed, 0x676f_7373_6970))
	limit := retransmitMult * int(math.Ceil(math.Log10(float64(n+1))))
	phase := make([]time.Duration, n)
	for i := range phase {
		phase[i] = time.Duration(rng.Int64N(int64(gossipInterval)))
	}
	learned := make([]bool, n)
	left := make([]int, n) // transmissions still due
	var q gossipQueue
	tick := func(i int, after time.Duration) {
		// The member's next gossip tick strictly after `after`.
		k := (after-phase[i])/gossipInterval + 1
		heap.Push(&q, gossipEvent{at: phase[i] + k*gossipInterval, from: i, to: -1})
	}
	var res spread
	learn := func(i int, at time.Duration) {
		learned[i], left[i] = true, limit
		res.reached++
		res.all = at
		tick(i, at)
	}
	learn(0, 0)
	delay := func() time.Duration {
		return minDelay + time.Duration(rng.Int64N(int64(maxDelay-minDelay)+1))
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(gossipEvent)
		if e.to >= 0 {
			if !learned[e.to] {
				learn(e.to, e.at)
			}
			continue
		}
		i := e.from
		for range gossipFanout {
			if left[i] == 0 {
				break
			}
			t := rng.IntN(n - 1)
			if t >= i {
				t++
			}
			left[i]--
			res.packets++
			heap.Push(&q, gossipEvent{at: e.at + delay(), from: i, to: t})
		}
		if left[i] > 0 {
			tick(i, e.at)
		}
	}
	return res
}

// measureFleet is a row for n members of which voters vote: the voters'
// failover comes from the simulator (the voter row, whose trials it
// shares), the observers learn the new leader through the gossip model,
// seeded per trial like the simulator.
func measureFleet(cfg config, voterRow Row, failovers []time.Duration, n, voters int) Row {
	row := Row{
		Protocol: "majority", N: n, Voters: voters, Trials: voterRow.Trials, Elected: voterRow.Elected,
		MsgsPerElection: voterRow.MsgsPerElection, MsgsMin: voterRow.MsgsMin, MsgsMax: voterRow.MsgsMax,
		MsgsByKind: voterRow.MsgsByKind, TraceHash: voterRow.TraceHash, Failures: voterRow.Failures,
		Suspected: voterRow.Suspected, SuspectMsMedian: voterRow.SuspectMsMedian,
		Theory: theory("majority", voters) + " among the voters; observers by gossip",
	}
	if len(failovers) == 0 {
		return row
	}
	var total, gossip []time.Duration
	var packets int64
	for i, f := range failovers {
		s := simulateSpread(n, sim.ScheduleSeed(cfg.seed, i), cfg.minDelay, cfg.maxDelay)
		row.GossipMissed += n - s.reached
		gossip = append(gossip, s.all)
		total = append(total, f+s.all)
		packets += s.packets
	}
	row.VirtualMsMedian, row.VirtualMsMax = ms(median(total)), ms(slices.Max(total))
	row.GossipMsMedian, row.GossipMsMax = ms(median(gossip)), ms(slices.Max(gossip))
	row.GossipPacketsPerMember = float64(packets) / float64(len(failovers)) / float64(n)
	return row
}

// parseFleet parses -fleet: member counts, or none.
func parseFleet(s string, voters int) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	sizes, err := parseSizes(s)
	if err != nil {
		return nil, err
	}
	for _, n := range sizes {
		if n <= voters {
			return nil, fmt.Errorf("electcost: -fleet: %d members leave no observers beside %d voters", n, voters)
		}
	}
	return sizes, nil
}

// writeFleetTable prints the fleet rows, if any.
func writeFleetTable(w io.Writer, cfg config, rows []Row) {
	var fleet []Row
	for _, r := range rows {
		if r.Voters > 0 {
			fleet = append(fleet, r)
		}
	}
	if len(fleet) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFleet: majority with %d voters, the other members observers that learn the new leader by gossip "+
		"(model: every member gossips every %v to %d random members, each announcement sent %d·⌈log10(N+1)⌉ times by every member that learns it).\n\n",
		cfg.fleetVoters, gossipInterval, gossipFanout, retransmitMult)
	fmt.Fprintln(w, "| members | voters | elected | msgs/election (voters) | gossip to the last member, median / max ms | gossip packets per member | members missed | crash to every member agreeing, median / max ms |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range fleet {
		fmt.Fprintf(w, "| %d | %d | %d/%d | %.1f | %.0f / %.0f | %.1f | %d | %.0f / %.0f |\n",
			r.N, r.Voters, r.Elected, r.Trials, r.MsgsPerElection, r.GossipMsMedian, r.GossipMsMax,
			r.GossipPacketsPerMember, r.GossipMissed, r.VirtualMsMedian, r.VirtualMsMax)
	}
}
