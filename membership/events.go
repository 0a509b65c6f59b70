package membership

import (
	"fmt"
	"sync"

	"github.com/conclave-agent/conclave/protocols"
)

// State is a member's state as this node last learned it.
type State uint8

// Member states. StateSuspect is set when this node's own probes of a member
// fail; it returns to StateAlive when a probe succeeds or fresh news of the
// member arrives.
const (
	StateAlive State = iota
	StateSuspect
	StateDead
	StateLeft
	// StateReaped is the state an EventReap carries: the member was dead
	// or left for ReapAfter and is forgotten.
	StateReaped
)

var stateNames = [...]string{"alive", "suspect", "dead", "left", "reaped"}

// String returns the state's name as the socket API shows it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Member is one node of the cluster as this node sees it.
type Member struct {
	// Name is the node's unique, stable name (memberlist's node name).
	Name string
	// ID is the node's numeric identity, which orders bully and ring.
	ID protocols.ID
	// Addr is the node's gossip address, host:port.
	Addr string
	// PeerID and PeerAddr are the node's libp2p peer id and multiaddr.
	PeerID   string
	PeerAddr string
	// Version is the conclave peer protocol version the node speaks.
	Version uint16
	// State is the node's state as last learned by this node.
	State State
	// UserMeta is what the node publishes as node.meta ("" for none or an
	// older agent).
	UserMeta string
	// Digest is the node's settings digest (SetDigest), "" from agents
	// that publish none.
	Digest string
	// Priority is the node's node.priority; 0 from agents that publish
	// none.
	Priority uint8
	// DigestExt is the extension of the node's settings digest
	// (SetDigest), "" from agents that publish none.
	DigestExt string
	// ElectionPriorities is the node's priority in the named elections
	// where it differs from Priority, encoded (EncodeElectionPriorities):
	// read it with PriorityIn.
	ElectionPriorities string
	// Elections is the bitmap of the named elections the node runs
	// (ElectionsBitmap), 0 from agents that do not say: read it with
	// MayRun.
	Elections uint64
}

// MayRun reports whether m may run the named election called election:
// false only when m publishes which it runs and that one is not among
// them (a bit shared with another name it runs reads as true).
func (m Member) MayRun(election string) bool {
	return m.Elections == 0 || m.Elections&electionBit(election) != 0
}

// PriorityIn is m's priority in the election called election: its
// [elections.NAME] priority when it publishes one, else Priority.
func (m Member) PriorityIn(election string) uint8 {
	if p, ok := electionPriority(m.ElectionPriorities, election); ok {
		return p
	}
	return m.Priority
}

// ProtocolMember returns the part of m an election protocol needs, with
// its priority in the default election.
func (m Member) ProtocolMember() protocols.Member {
	return protocols.Member{ID: m.ID, Name: m.Name, Priority: m.Priority}
}

// EventKind says what happened to a member.
type EventKind uint8

// Event kinds.
const (
	// EventAlive: the member joined, or came back after being dead, left or
	// suspected.
	EventAlive EventKind = iota
	// EventSuspect: this node's probes of the member failed.
	EventSuspect
	// EventDead: the cluster declared the member failed.
	EventDead
	// EventLeft: the member left gracefully.
	EventLeft
	// EventUpdate: the member's metadata changed.
	EventUpdate
	// EventResync: events were dropped because the consumer fell behind.
	// Member is empty; the consumer must call Members() and treat the
	// snapshot as the truth.
	EventResync
	// EventReap: the member was dead or left for Config.ReapAfter (or
	// too many members were) and is forgotten; Member is its last state
	// with State StateReaped. The consumer should forget it too.
	EventReap
)

var kindNames = [...]string{"alive", "suspect", "dead", "left", "update", "resync", "reap"}

// String returns the kind's name.
func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is a change of one member. Member carries the member's full state
// after the change, so applying an event twice is harmless.
type Event struct {
	Kind   EventKind
	Member Member
}

// DefaultEventBuffer is the number of events held for a slow consumer when
// the configuration does not say.
const DefaultEventBuffer = 256

// eventQueue decouples producers that must never block (memberlist's
// callbacks) from the consumer. Producers append under a mutex; one
// dispatcher goroutine hands events to an unbuffered channel. When more than
// limit events are waiting, they are all dropped and replaced by a single
// EventResync: the consumer re-reads the member list, which the producers
// keep current independently of the queue. While a resync is pending, new
// events are not queued because the snapshot will cover them.
type eventQueue struct {
	out    chan Event
	wake   chan struct{}
	done   chan struct{}
	exited chan struct{}

	mu     sync.Mutex
	q      []Event
	limit  int
	resync bool
	closed bool
}

func newEventQueue(limit int) *eventQueue {
	if limit <= 0 {
		limit = DefaultEventBuffer
	}
	eq := &eventQueue{
		out:    make(chan Event),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		limit:  limit,
	}
	go eq.run()
	return eq
}

// push never blocks.
func (eq *eventQueue) push(ev Event) {
	eq.mu.Lock()
	switch {
	case eq.closed, eq.resync:
	case len(eq.q) >= eq.limit:
		eq.q = nil
		eq.resync = true
	default:
		eq.q = append(eq.q, ev)
	}
	eq.mu.Unlock()
	select {
	case eq.wake <- struct{}{}:
	default:
	}
}

func (eq *eventQueue) next() (Event, bool) {
	eq.mu.Lock()
	defer eq.mu.Unlock()
	if eq.resync {
		eq.resync = false
		return Event{Kind: EventResync}, true
	}
	if len(eq.q) == 0 {
		return Event{}, false
	}
	ev := eq.q[0]
	eq.q[0] = Event{}
	eq.q = eq.q[1:]
	return ev, true
}

func (eq *eventQueue) run() {
	defer close(eq.exited)
	defer close(eq.out)
	for {
		select {
		case <-eq.wake:
		case <-eq.done:
			return
		}
		for {
			ev, ok := eq.next()
			if !ok {
				break
			}
			select {
			case eq.out <- ev:
			case <-eq.done:
				return
			}
		}
	}
}

// close stops the dispatcher and closes the output channel; events still
// queued are dropped. It is idempotent and waits for the dispatcher to exit.
func (eq *eventQueue) close() {
	eq.mu.Lock()
	if !eq.closed {
		eq.closed = true
		close(eq.done)
	}
	eq.mu.Unlock()
	<-eq.exited
}
