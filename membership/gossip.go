package membership

import (
	"github.com/hashicorp/memberlist"
)

// Gossiper is implemented by clusters that can spread small messages to
// every member by gossip: memberlist piggybacks them on its gossip packets
// and each member relays what it chooses to, so a message reaches N members
// in O(log N) rounds at a cost per member that does not grow with N.
// *Membership implements it; the in-memory MemNode does not.
type Gossiper interface {
	// Gossip queues a message on topic for this node's next gossip
	// rounds, replacing the one of that topic still queued (each
	// election's announcements are a topic: a newer claim makes the
	// older one worthless, another election's does not). msg is called
	// at every transmission (from a memberlist goroutine), so it can say
	// how old its content is by then; it must be safe for concurrent use
	// and return at most MaxGossipBytes.
	Gossip(topic string, msg func() []byte)
	// Gossiped delivers the messages other members gossiped, each once
	// per transmission received (duplicates included). When the reader
	// falls behind, new messages are dropped.
	Gossiped() <-chan []byte
}

var _ Gossiper = (*Membership)(nil)

// MaxGossipBytes bounds a gossiped message; longer ones are neither sent
// nor delivered.
const MaxGossipBytes = 256

// gossipBuffer is how many received messages wait for the reader.
const gossipBuffer = 64

// retransmitMult is memberlist's default: each queued message is sent
// retransmitMult·⌈log10(N+1)⌉ times.
const retransmitMult = 4

// userBroadcast is a queued Gossip message.
type userBroadcast struct {
	topic string
	msg   func() []byte
}

// Invalidates: one queued message per topic, the newest.
func (b *userBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*userBroadcast)
	return ok && o.topic == b.topic
}

func (b *userBroadcast) Message() []byte {
	m := b.msg()
	if len(m) > MaxGossipBytes {
		return nil
	}
	return m
}

func (b *userBroadcast) Finished() {}

// Gossip implements Gossiper.
func (m *Membership) Gossip(topic string, msg func() []byte) {
	m.broadcasts.QueueBroadcast(&userBroadcast{topic: topic, msg: msg})
}

// Gossiped implements Gossiper.
func (m *Membership) Gossiped() <-chan []byte { return m.gossiped }

// liveCount is how many members are alive or suspect, this node included,
// for the retransmit count.
func (m *Membership) liveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, mb := range m.members {
		if mb.State == StateAlive || mb.State == StateSuspect {
			n++
		}
	}
	return max(n, 1)
}

// notifyMsg hands a query frame to queryMsg and delivers any other received
// user message to Gossiped, copied (memberlist reuses the buffer), without
// ever blocking memberlist.
func (m *Membership) notifyMsg(b []byte) {
	if len(b) > 0 && b[0] == queryMagic {
		m.queryMsg(b)
		return
	}
	if len(b) == 0 || len(b) > MaxGossipBytes {
		return
	}
	select {
	case m.gossiped <- append([]byte(nil), b...):
	default:
	}
}
