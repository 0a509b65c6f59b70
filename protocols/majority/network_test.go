package majority

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// testNet drives majority nodes synchronously, in the manner of etcd-io/raft's
// raft_test.go network: one shared virtual clock, messages delivered at once
// unless a link is cut, and the driver contract (persist, send, announce,
// advance) applied after every input.
type testNet struct {
	cfg      Config
	now      protocols.Time
	nodes    map[protocols.ID]*Node
	disk     map[protocols.ID]protocols.HardState
	members  []protocols.Member
	cut      map[[2]protocols.ID]bool // directed links that drop
	queue    []protocols.Message
	sent     map[protocols.MessageKind]int
	events   []string
	traceMsg bool
	seed     uint64
	// lazy ticks a node only when its NextDeadline is due, as the agent
	// does; otherwise every node ticks every testTick.
	lazy bool
}

const testTick = 10 * time.Millisecond

func baseConfig() Config {
	return Config{
		ElectionTimeout:   time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		PreVote:           true,
		CheckQuorum:       true,
		MaxClockDrift:     0.01,
	}
}

// newTestNet starts n voters named n1…nN with ids 1…N (plus observers
// named o<i> with the following ids).
func newTestNet(n, observers int, seed uint64, cfg Config) *testNet {
	tn := &testNet{
		cfg:   cfg,
		nodes: map[protocols.ID]*Node{},
		disk:  map[protocols.ID]protocols.HardState{},
		cut:   map[[2]protocols.ID]bool{},
		sent:  map[protocols.MessageKind]int{},
		seed:  seed,
	}
	var voters []string
	for i := 1; i <= n+observers; i++ {
		name := fmt.Sprintf("n%d", i)
		if i > n {
			name = fmt.Sprintf("o%d", i)
		} else {
			voters = append(voters, name)
		}
		tn.members = append(tn.members, protocols.Member{ID: protocols.ID(i), Name: name, Voter: i <= n})
	}
	tn.cfg.Voters = voters
	for _, m := range tn.members {
		tn.start(m.ID)
	}
	return tn
}

func (tn *testNet) start(id protocols.ID) {
	c := tn.cfg
	c.ID = id
	c.Members = tn.members
	c.HardState = tn.disk[id]
	c.Now = tn.now
	c.Rand = rand.New(rand.NewPCG(tn.seed, uint64(id)*7919+uint64(tn.now)))
	n, err := New(c)
	if err != nil {
		panic(err)
	}
	tn.nodes[id] = n
	tn.drain(id)
}

func (tn *testNet) ids() []protocols.ID {
	ids := make([]protocols.ID, 0, len(tn.nodes))
	for id := range tn.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// drain applies the driver contract to one node.
func (tn *testNet) drain(id protocols.ID) {
	n := tn.nodes[id]
	for n.HasReady() {
		rd := n.Ready()
		if rd.HardState != nil {
			tn.disk[id] = *rd.HardState
		}
		for _, m := range rd.Messages {
			tn.sent[m.Kind]++
			if tn.traceMsg {
				tn.events = append(tn.events, fmt.Sprintf("%v send %v", tn.now.Sub(0), m))
			}
			tn.queue = append(tn.queue, m)
		}
		if ss := rd.SoftState; ss != nil {
			tn.events = append(tn.events, fmt.Sprintf("%v n%d %s leader=%d term=%d", tn.now.Sub(0), id, ss.Role, ss.Leader, ss.Epoch))
		}
		n.Advance(rd)
	}
}

// deliver delivers queued messages until none are left.
func (tn *testNet) deliver() {
	for len(tn.queue) > 0 {
		m := tn.queue[0]
		tn.queue = tn.queue[1:]
		n, ok := tn.nodes[m.To]
		if !ok || tn.cut[[2]protocols.ID{m.From, m.To}] {
			continue
		}
		if err := n.Step(tn.now, m); err != nil {
			panic(err)
		}
		tn.drain(m.To)
	}
}

// run advances virtual time by d in ticks, delivering after each.
func (tn *testNet) run(d time.Duration) {
	end := tn.now.Add(d)
	for tn.now < end {
		tn.now = tn.now.Add(testTick)
		for _, id := range tn.ids() {
			if tn.lazy {
				n := tn.nodes[id]
				d, ok := n.NextDeadline(tn.now)
				if !ok || d > tn.now {
					// Sleeping until d is only right if nobody asking
					// before d would hear another answer (a lease ending).
					until := tn.now.Add(time.Hour)
					if ok {
						until = d - 1
					}
					if a, b := n.Status(tn.now), n.Status(until); a != b {
						panic(fmt.Sprintf("n%d: status changes from %+v to %+v before its deadline", id, a, b))
					}
					continue
				}
			}
			tn.nodes[id].Tick(tn.now)
			tn.drain(id)
		}
		tn.deliver()
	}
}

// runUntilLeader advances until some node holds a lease, for at most max.
func (tn *testNet) runUntilLeader(max time.Duration) (protocols.ID, time.Duration) {
	start := tn.now
	for tn.now.Sub(start) < max {
		if l := tn.leader(); l != protocols.None {
			return l, tn.now.Sub(start)
		}
		tn.run(testTick)
	}
	return protocols.None, tn.now.Sub(start)
}

// leader returns the node that reports itself leader now, or None.
func (tn *testNet) leader() protocols.ID {
	for _, id := range tn.ids() {
		if tn.nodes[id].Status(tn.now).Role == protocols.Leader {
			return id
		}
	}
	return protocols.None
}

func (tn *testNet) isolate(id protocols.ID) {
	for _, m := range tn.members {
		if m.ID != id {
			tn.cut[[2]protocols.ID{id, m.ID}] = true
			tn.cut[[2]protocols.ID{m.ID, id}] = true
		}
	}
}

func (tn *testNet) heal() { clear(tn.cut) }

func (tn *testNet) crash(id protocols.ID) { delete(tn.nodes, id) }

func (tn *testNet) status() string {
	var b strings.Builder
	for _, id := range tn.ids() {
		st := tn.nodes[id].Status(tn.now)
		fmt.Fprintf(&b, "n%d: %s leader=%d epoch=%d", id, st.Role, st.Leader, st.Epoch)
		if st.LeaseUntil != 0 {
			fmt.Fprintf(&b, " lease=%v", st.LeaseUntil.Sub(tn.now))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (tn *testNet) takeEvents() string {
	out := strings.Join(tn.events, "\n")
	tn.events = nil
	if out != "" {
		out += "\n"
	}
	return out
}
