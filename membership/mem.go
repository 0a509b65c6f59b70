package membership

import (
	"fmt"
	"sync"
	"time"
)

// MemNetwork is an in-memory twin of a memberlist cluster for tests of code
// that uses Cluster. Changes reach every node at once and in order; there is
// no gossip delay, no loss and no failure detection of its own: a test says
// who fails.
type MemNetwork struct {
	mu    sync.Mutex
	nodes map[string]*MemNode
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: make(map[string]*MemNode)}
}

// MemNode is one node's membership on a MemNetwork.
type MemNode struct {
	net    *MemNetwork
	self   Member
	events *eventQueue

	mu       sync.Mutex
	view     map[string]Member
	left     bool
	shutdown bool
}

// Join adds a node described by self (its State is ignored) and tells it and
// every other node about each other, as EventAlive. eventBuffer works as
// Config.EventBuffer. A name already in use by a running node is an error.
func (n *MemNetwork) Join(self Member, eventBuffer int) (*MemNode, error) {
	if self.Name == "" {
		return nil, fmt.Errorf("membership: mem: empty node name")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[self.Name]; ok {
		return nil, fmt.Errorf("membership: mem: node name %q is in use", self.Name)
	}
	self.State = StateAlive
	node := &MemNode{net: n, self: self, events: newEventQueue(eventBuffer), view: make(map[string]Member)}
	node.apply(EventAlive, self)
	for _, other := range n.nodes {
		other.apply(EventAlive, self)
		node.apply(EventAlive, other.self)
	}
	n.nodes[self.Name] = node
	return node, nil
}

// Suspect marks name as suspected by every other node, as if their probes
// failed; Recover undoes it.
func (n *MemNetwork) Suspect(name string) { n.broadcast(name, StateSuspect, EventSuspect) }

// Recover marks a suspected name alive again at every other node.
func (n *MemNetwork) Recover(name string) { n.broadcast(name, StateAlive, EventAlive) }

func (n *MemNetwork) broadcast(name string, state State, kind EventKind) {
	n.mu.Lock()
	defer n.mu.Unlock()
	node, ok := n.nodes[name]
	if !ok {
		return
	}
	mb := node.self
	mb.State = state
	for other, o := range n.nodes {
		if other != name {
			o.apply(kind, mb)
		}
	}
}

// apply records mb in the node's view and queues the event; callers hold
// MemNetwork.mu, which keeps every node's events in one global order.
func (m *MemNode) apply(kind EventKind, mb Member) {
	m.mu.Lock()
	m.view[mb.Name] = mb
	m.mu.Unlock()
	m.events.push(Event{Kind: kind, Member: mb})
}

// Events implements Cluster.
func (m *MemNode) Events() <-chan Event { return m.events.out }

// Members implements Cluster.
func (m *MemNode) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedMembers(m.view)
}

// Leave implements Cluster: every other node sees this one as left.
func (m *MemNode) Leave(time.Duration) error {
	n := m.net
	n.mu.Lock()
	defer n.mu.Unlock()
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return ErrShutdown
	}
	m.left = true
	m.mu.Unlock()
	n.departLocked(m, StateLeft, EventLeft)
	return nil
}

// Shutdown implements Cluster: a node that did not leave is seen as dead by
// the others. The name becomes free for a new Join.
func (m *MemNode) Shutdown() error {
	n := m.net
	n.mu.Lock()
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		n.mu.Unlock()
		return nil
	}
	m.shutdown = true
	left := m.left
	m.mu.Unlock()
	if !left {
		n.departLocked(m, StateDead, EventDead)
	}
	delete(n.nodes, m.self.Name)
	n.mu.Unlock()
	m.events.close()
	return nil
}

func (n *MemNetwork) departLocked(m *MemNode, state State, kind EventKind) {
	mb := m.self
	mb.State = state
	for name, o := range n.nodes {
		if name != m.self.Name {
			o.apply(kind, mb)
		}
	}
}
