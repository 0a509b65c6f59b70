// Package sim is conclave's deterministic simulator: it runs N instances of
// any protocols.Protocol on an in-memory network in virtual time, injects
// faults (message delay, loss, duplication and reordering; partitions;
// crashes that lose everything not persisted, and restarts from the persisted
// HardState; process pauses, alone or of a group at once; bounded clock-rate
// drift) and checks the election guarantees after every single event.
//
// # Determinism
//
// A run is a pure function of its Options and its seed. The package must
// never start a goroutine inside a run, read the wall clock, use the global
// math/rand source, or let map iteration order influence anything: one
// seeded math/rand/v2 generator per run drives every choice (the schedule,
// network delays, drops, the per-node generators handed to the protocols),
// events are ordered by (virtual time, sequence number), and nodes and peers
// are always visited in index order. The same seed therefore replays the same
// trace exactly; Result.TraceHash fingerprints it. Only RunMany uses
// goroutines, to run independent schedules side by side.
//
// # Driver
//
// Each node is driven exactly as the protocols package's driver contract
// says: after every input, while HasReady, take Ready, persist its HardState
// to the node's simulated durable storage, put its Messages on the network,
// record its SoftState, and Advance. A crash discards the protocol instance
// and every input queued for it; a restart builds a new instance through the
// Factory from the persisted HardState only.
//
// # Core mode
//
// With Options.Core every node is a core.Node, the agent's pure driver,
// driven as agent/agent.go drives it: messages go through core.Step (whose
// heartbeats feed the core's real phi detectors), time through core.Tick
// at the core's own NextWake, membership through core.ApplyMember from a
// model of memberlist (membermodel.go: join lag, death declared seconds
// late, restarts never seen dying, new peer ids, graceful leaves),
// announcements through core.Gossiped; a message leaves only for an id the
// sender's transport peer table (built from Ready.Peers) holds under the
// destination's current peer id. The checker reads core.Node.Leader, what
// the socket reports, and a failover probe (Checks.FailoverBound) crashes
// a freshly elected leader after the heal. See docs/simulator.md.
//
// # Checker
//
// After every event the checker asks every non-crashed node (paused ones
// too: their clocks run on) for Status at its local time and verifies the
// enabled Checks: at most one leader per epoch; every node that learns a
// leader for an epoch learns the same one; no node's epoch ever decreases,
// across restarts too; with Checks.Lease, at most one node reports itself
// leader at any instant; a fenced resource never accepts writes from two
// different leaders under the same epoch; and, once every fault is healed,
// a leader that every node agrees on is elected within Checks.LivenessBound.
// The first violation stops the run; the Violation names the invariant and
// the seed and carries the last events of the trace. With VoteOncePerTerm
// it also checks, on the wire, that no node grants two candidates its vote
// in one term.
//
// # Running
//
// Run draws a schedule from a seed and runs it; RunSchedule runs a
// hand-written one; RunMany runs a batch of seeds on several goroutines.
// The tests replay one schedule with its full trace:
//
//	go test ./sim -run TestMajoritySchedules -seed N -v
//
// and sim/cmd/soak runs long batches of any registered protocol
// (sim/registry):
//
//	go run ./sim/cmd/soak -protocol majority -schedules 200000 -seed 1 -workers 2
//	go run ./sim/cmd/soak -protocol majority -replay N
package sim
