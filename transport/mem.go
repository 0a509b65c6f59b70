package transport

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/conclave-agent/conclave/protocols"
)

// MemNetwork connects MemTransports in one process, for tests of the agent
// without sockets. Delivery is synchronous and FIFO per sender, so tests
// stay deterministic, yet it keeps the Host's rules: both sides must have
// admitted each other with SetPeer, From must be the sender's ID, To must be
// the receiver or None, and a full inbound channel drops.
type MemNetwork struct {
	mu    sync.RWMutex
	nodes map[string]*MemTransport // by peer id
}

// NewMemNetwork returns an empty in-memory network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: map[string]*MemTransport{}}
}

// MemPeerID is the peer id of the in-memory node with ID self.
func MemPeerID(self protocols.ID) string { return fmt.Sprintf("mem-%d", self) }

// Node attaches a node with ID self whose Inbound channel holds inboundLen
// messages (DefaultInboundLen if zero). Its peer id is MemPeerID(self).
func (n *MemNetwork) Node(self protocols.ID, inboundLen int) *MemTransport {
	if inboundLen <= 0 {
		inboundLen = DefaultInboundLen
	}
	t := &MemTransport{
		net:     n,
		self:    self,
		peerID:  MemPeerID(self),
		inbound: make(chan protocols.Message, inboundLen),
		stats:   newCounters(),
		peers:   map[protocols.ID]string{},
		byPeer:  map[string]protocols.ID{},
	}
	n.mu.Lock()
	n.nodes[t.peerID] = t
	n.mu.Unlock()
	return t
}

// MemTransport is one node on a MemNetwork. It is safe for concurrent use.
type MemTransport struct {
	net     *MemNetwork
	self    protocols.ID
	peerID  string
	inbound chan protocols.Message
	stats   *counters

	mu     sync.RWMutex
	closed bool
	peers  map[protocols.ID]string
	byPeer map[string]protocols.ID
}

// PeerID returns the node's peer id on the network.
func (t *MemTransport) PeerID() string { return t.peerID }

// Inbound implements Transport.
func (t *MemTransport) Inbound() <-chan protocols.Message { return t.inbound }

// Stats implements Transport.
func (t *MemTransport) Stats() Stats { return t.stats.snapshot() }

// SetPeer implements Transport; addr is ignored.
func (t *MemTransport) SetPeer(id protocols.ID, peerID string, _ string) error {
	if id == protocols.None || id == t.self {
		return fmt.Errorf("transport: set peer: invalid member id %d", id)
	}
	if peerID == "" {
		return fmt.Errorf("transport: set peer %d: empty peer id", id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("transport: set peer: closed")
	}
	if other, ok := t.byPeer[peerID]; ok && other != id {
		return fmt.Errorf("transport: set peer %d: peer id %s already belongs to member %d", id, peerID, other)
	}
	if old, ok := t.peers[id]; ok {
		delete(t.byPeer, old)
	}
	t.peers[id] = peerID
	t.byPeer[peerID] = id
	return nil
}

// Reachable implements Transport: the member is admitted and its node is
// on the network.
func (t *MemTransport) Reachable(id protocols.ID) bool {
	t.mu.RLock()
	pid, ok := t.peers[id]
	t.mu.RUnlock()
	if !ok {
		return false
	}
	t.net.mu.RLock()
	defer t.net.mu.RUnlock()
	return t.net.nodes[pid] != nil
}

// SetProbed implements Transport. The in-memory network knows at once
// which nodes are on it, so there is nothing to probe either way.
func (t *MemTransport) SetProbed(protocols.ID, bool) {}

// RemovePeer implements Transport.
func (t *MemTransport) RemovePeer(id protocols.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		delete(t.byPeer, p)
		delete(t.peers, id)
	}
}

// Send implements Transport. It delivers at once or drops; it never blocks.
func (t *MemTransport) Send(to protocols.ID, m protocols.Message) {
	t.sendGroup(to, []protocols.Message{m})
}

// SendAll implements Transport. Each member's messages travel as the
// coalesced frames of BatchProtocolID would carry them (MaxBatch to a
// frame), counted as one write, and are delivered at once or dropped.
func (t *MemTransport) SendAll(msgs []protocols.Message) {
	for _, g := range groupByTo(msgs) {
		t.sendGroup(g[0].To, g)
	}
}

func (t *MemTransport) sendGroup(to protocols.ID, msgs []protocols.Message) {
	t.mu.RLock()
	closed := t.closed
	pid, ok := t.peers[to]
	t.mu.RUnlock()
	switch {
	case closed:
		t.stats.dropN(DropClosed, len(msgs))
		return
	case !ok:
		t.stats.dropN(DropUnknownPeer, len(msgs))
		return
	}
	// Encode and decode so the twin refuses exactly what the wire
	// refuses: a message that cannot be encoded is dropped alone, as the
	// Host's sender drops it.
	enc := newMapEncoder()
	var pk framePacker
	pk.reset(DefaultMaxMessageBytes)
	encoded := 0
	for _, m := range msgs {
		b, err := enc.encode(m)
		if err != nil {
			t.stats.drop(Reason(err))
			continue
		}
		pk.add(b)
		encoded++
	}
	pk.flush()
	if pk.frames == 0 {
		return
	}
	t.net.mu.RLock()
	dst := t.net.nodes[pid]
	t.net.mu.RUnlock()
	if dst == nil {
		t.stats.dropN(DropSendFailed, encoded)
		return
	}
	t.stats.wrote(pk.frames, len(pk.out))
	var fr frameReader
	var bd batchDecoder
	r := bytes.NewReader(pk.out)
	for r.Len() > 0 {
		body, err := fr.readBody(r, DefaultMaxMessageBytes)
		var got []protocols.Message
		if err == nil {
			got, err = bd.decode(nil, body)
		}
		if err != nil {
			// Not reached: the packer writes what the reader takes.
			t.stats.drop(Reason(err))
			return
		}
		for _, m := range got {
			t.stats.sent[m.Kind].Add(1)
		}
		dst.deliver(t.peerID, got)
	}
}

// deliver applies the Host's reader's rules to the messages of one frame:
// the frame is refused whole when the sender is not admitted or one of its
// messages claims another From, and a misaddressed message is dropped
// alone.
func (t *MemTransport) deliver(fromPeer string, msgs []protocols.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return
	}
	id, ok := t.byPeer[fromPeer]
	if !ok {
		t.stats.drop(DropUnauthorized)
		return
	}
	for _, m := range msgs {
		if m.From != id {
			t.stats.drop(DropSpoofedFrom)
			return
		}
	}
	t.stats.framesIn.Add(1)
	for _, m := range msgs {
		switch {
		case m.To != t.self && m.To != protocols.None:
			t.stats.drop(DropMisaddressed)
			continue
		}
		select {
		case t.inbound <- m:
			t.stats.received[m.Kind].Add(1)
		default:
			t.stats.drop(DropInboundFull)
		}
	}
}

// Close implements Transport: the node leaves the network and Inbound is
// closed.
func (t *MemTransport) Close() error {
	t.net.mu.Lock()
	if t.net.nodes[t.peerID] == t {
		delete(t.net.nodes, t.peerID)
	}
	t.net.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.inbound)
	}
	return nil
}

// PeerCount returns how many members are admitted (tests check that churn
// does not grow it).
func (t *MemTransport) PeerCount() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.peers)
}
