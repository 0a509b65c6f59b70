package transport

import (
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
)

// Transport is what the agent needs from the network: fire-and-forget sends
// to member IDs, one inbound channel, and membership-driven admission. Host
// is the libp2p implementation, MemTransport the in-memory twin.
//
// Send never blocks and never fails loudly: election protocols tolerate
// loss, so a message that cannot go (unknown peer, full queue, broken
// stream) is dropped and counted in Stats. All methods are safe for
// concurrent use.
type Transport interface {
	// Send queues m for the member to. It never blocks the caller. It is
	// SendAll of one message.
	Send(to protocols.ID, m protocols.Message)
	// SendAll queues msgs, each for the member its To names, as one unit
	// per member: the member's sender writes a unit at once, in one
	// coalesced frame when the member speaks BatchProtocolID, so a
	// member costs one write per call however many elections the
	// messages belong to. Messages to the same member keep their order.
	// It never blocks the caller and does not keep msgs.
	SendAll(msgs []protocols.Message)
	// Inbound delivers authenticated messages addressed to this node. It is
	// closed when Close returns.
	Inbound() <-chan protocols.Message
	// SetPeer admits member id, reachable as peerID at addr (a multiaddr),
	// or updates its address. Only admitted members may exchange messages.
	SetPeer(id protocols.ID, peerID string, addr string) error
	// RemovePeer forgets member id and drops its connections and queue.
	RemovePeer(id protocols.ID)
	// SetProbed says whether this node keeps member id's reachability
	// known by probing it when it falls silent (the default), or only
	// learns it from the member's own traffic. It may be called before
	// SetPeer and holds until changed, whatever the member's address.
	SetProbed(id protocols.ID, probed bool)
	// Reachable reports whether member id was heard from recently: a
	// message from it, or an answer to a probe. Gossip may still call a
	// member alive that this transport cannot reach; quorum health is
	// computed from this instead.
	Reachable(id protocols.ID) bool
	// Stats returns a snapshot of the counters.
	Stats() Stats
	// Close stops every goroutine and releases the network.
	Close() error
}

// Compile-time checks that both implementations satisfy Transport.
var (
	_ Transport = (*Host)(nil)
	_ Transport = (*MemTransport)(nil)
)

// ProtocolID is the first libp2p stream protocol election messages travel
// on: one message per frame, the default election's only. Every release
// speaks it; BatchProtocolID (batch.go) is preferred when both sides know
// it.
const ProtocolID = "/conclave/election/1"

// Defaults applied by New for zero Config fields.
const (
	// DefaultQueueLen bounds each peer's outbound queue, in messages. A
	// majority leader sends one heartbeat per peer per interval; 64 covers
	// bursts (an election plus heartbeats) while a dead peer holds little
	// memory. The queue holds units (a Send, or SendAll's messages for
	// one peer) and takes or refuses each whole: a unit is taken while
	// fewer than QueueLen messages wait, however large, so a coalesced
	// batch is never cut or refused for its size alone, and the queue
	// never holds more than QueueLen-1 messages plus one unit. A refused
	// unit counts one DropQueueFull per message.
	DefaultQueueLen = 64
	// DefaultInboundLen bounds the inbound channel the agent drains.
	DefaultInboundLen = 1024
	// DefaultWriteTimeout bounds one stream write, so a stalled peer costs
	// its own sender goroutine time and never anyone else's.
	DefaultWriteTimeout = 2 * time.Second
	// DefaultDialTimeout bounds connecting and opening a stream.
	DefaultDialTimeout = 3 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the exponential wait
	// between reconnection attempts to one peer.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// Config configures a Host. Zero fields take the defaults above.
type Config struct {
	// DataDir holds node.key, the node's persistent Ed25519 identity.
	DataDir string
	// Listen is the multiaddr to listen on, e.g. /ip4/127.0.0.1/tcp/7947
	// ([transport] listen).
	Listen string
	// Advertise, when set, is the multiaddr other members should dial
	// instead of the listen addresses ([transport] advertise): the public
	// side of a NAT port forward, or a proxy in front of Listen. It
	// replaces what Addrs returns and what identify tells peers. A host
	// and a TCP port, without /p2p.
	Advertise string
	// Publish, when valid and Advertise is empty, is the one IP address to
	// publish from a wildcard Listen (0.0.0.0 or ::): libp2p would
	// otherwise publish every interface address, loopback first, and
	// peers that dial 127.0.0.1 dial themselves. The agent picks it with
	// internal/netaddr, usually the address gossip publishes.
	Publish netip.Addr
	// ClusterKey, when set and Keys is nil, is the one installed cluster
	// key ([gossip] key).
	ClusterKey []byte
	// Keys, when set, returns the installed cluster keys at this moment
	// (the keyring, which changes at run time). With any key, every
	// connection runs the admission handshake (admit.go) right after
	// Noise: a peer is admitted when it proves any installed key, so only
	// nodes that may gossip may open election streams, and a key rotation
	// never cuts two members apart while they share a key.
	Keys func() [][]byte
	// MaxMessageBytes bounds a frame body ([transport] max_message_bytes);
	// zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Logger receives transport logs and libp2p's own (see SetLibp2pLogger).
	// Nil means no logging.
	Logger *zap.Logger
	// Self is this node's member ID. Messages whose To is neither Self nor
	// None are dropped as misaddressed.
	Self protocols.ID
	// QueueLen bounds each peer's outbound queue.
	QueueLen int
	// InboundLen bounds the Inbound channel.
	InboundLen int
	// WriteTimeout bounds each stream write.
	WriteTimeout time.Duration
	// DialTimeout bounds each connection and stream attempt.
	DialTimeout time.Duration
	// MinBackoff and MaxBackoff bound reconnection backoff.
	MinBackoff, MaxBackoff time.Duration
	// ProbeAfter is how long a member may be silent before it is probed
	// (DefaultProbeAfter); ProbeTimeout bounds a probe
	// (DefaultProbeTimeout).
	ProbeAfter, ProbeTimeout time.Duration
	// IdleProbeAfter is the slow probe speed (DefaultIdleProbeAfter): a
	// member this node has sent nothing to for IdleProbeAfter, and whose
	// last probe did not fail, is probed after this much silence instead
	// of ProbeAfter, or after IdleProbeSpacing per such member if that is
	// longer, so a fleet's idle pairs cost each agent a bounded probe rate.
	IdleProbeAfter time.Duration
	// IdleProbeSpacing (DefaultIdleProbeSpacing) spreads the idle members'
	// probes: with n idle members each is probed at most every
	// n·IdleProbeSpacing.
	IdleProbeSpacing time.Duration

	// onlyV1 makes the host speak ProtocolID alone, as releases up to
	// v0.1.0 do: tests use it to stand for such a peer.
	onlyV1 bool
}

func (c *Config) setDefaults() {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.QueueLen <= 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.InboundLen <= 0 {
		c.InboundLen = DefaultInboundLen
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.ProbeAfter <= 0 {
		c.ProbeAfter = DefaultProbeAfter
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.IdleProbeAfter <= 0 {
		c.IdleProbeAfter = max(DefaultIdleProbeAfter, c.ProbeAfter)
	}
	if c.IdleProbeSpacing <= 0 {
		c.IdleProbeSpacing = DefaultIdleProbeSpacing
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
}

// Drop reasons counted in Stats.Dropped, besides the decode reasons of
// Reason (too_large, truncated, malformed, trailing_bytes, unknown_kind,
// out_of_range), which count frames refused on an inbound stream.
const (
	// DropUnknownPeer: Send to an ID that SetPeer never admitted.
	DropUnknownPeer = "unknown_peer"
	// DropQueueFull: the peer's outbound queue was full.
	DropQueueFull = "queue_full"
	// DropSendFailed: connecting or writing failed; the message is lost.
	DropSendFailed = "send_failed"
	// DropInboundFull: the agent did not drain Inbound fast enough. No
	// longer counted by Host, whose readers wait for room in turn (one
	// member cannot crowd out the others); kept for the in-memory network.
	DropInboundFull = "inbound_full"
	// DropUnauthorized: a stream or connection from a peer id that is not
	// a current member.
	DropUnauthorized = "unauthorized_peer"
	// DropSpoofedFrom: a member sent a message claiming another From.
	DropSpoofedFrom = "spoofed_from"
	// DropMisaddressed: a message whose To is another node.
	DropMisaddressed = "misaddressed"
	// DropClosed: Send after Close.
	DropClosed = "closed"
	// DropUnsupported: a named election's message to a peer that speaks
	// only ProtocolID (a release up to v0.1.0), which cannot carry it.
	DropUnsupported = "unsupported_election"
)

var dropReasons = []string{
	DropUnknownPeer, DropQueueFull, DropSendFailed, DropInboundFull,
	DropUnauthorized, DropSpoofedFrom, DropMisaddressed, DropClosed, DropUnsupported,
	ReasonTooLarge, ReasonTruncated, ReasonMalformed, ReasonTrailingBytes,
	ReasonUnknownKind, ReasonOutOfRange, ReasonOther,
}

// Stats is a snapshot of a transport's counters, keyed by kind name
// (MessageKind.String) and drop reason. Only non-zero counters appear.
type Stats struct {
	// Sent counts messages written to a peer's stream, by kind.
	Sent map[string]uint64
	// Received counts messages delivered on Inbound, by kind.
	Received map[string]uint64
	// Dropped counts messages and frames lost, by reason.
	Dropped map[string]uint64
	// FramesSent counts frames written: a v1 frame carries one message,
	// a v2 frame up to MaxBatch. Writes counts stream writes, each one or
	// more frames (the sender's system calls), and BytesSent their bytes,
	// length prefixes included. MemTransport counts each SendAll group
	// as one write.
	FramesSent, Writes, BytesSent uint64
	// FramesReceived counts frames read and accepted, of either protocol.
	FramesReceived uint64
}

// counters are lock-free so Send and the readers never contend on them.
type counters struct {
	sent, received                  [256]atomic.Uint64
	dropped                         map[string]*atomic.Uint64 // fixed key set, never written after init
	frames, writes, bytes, framesIn atomic.Uint64
}

// wrote counts one successful write of frames frames and n bytes.
func (c *counters) wrote(frames, n int) {
	c.frames.Add(uint64(frames))
	c.writes.Add(1)
	c.bytes.Add(uint64(n))
}

func newCounters() *counters {
	c := &counters{dropped: make(map[string]*atomic.Uint64, len(dropReasons))}
	for _, r := range dropReasons {
		c.dropped[r] = new(atomic.Uint64)
	}
	return c
}

func (c *counters) drop(reason string) { c.dropN(reason, 1) }

// dropN counts n messages lost for reason.
func (c *counters) dropN(reason string, n int) {
	if v, ok := c.dropped[reason]; ok {
		v.Add(uint64(n))
		return
	}
	c.dropped[ReasonOther].Add(uint64(n))
}

func (c *counters) snapshot() Stats {
	s := Stats{Sent: map[string]uint64{}, Received: map[string]uint64{}, Dropped: map[string]uint64{},
		FramesSent: c.frames.Load(), Writes: c.writes.Load(), BytesSent: c.bytes.Load(), FramesReceived: c.framesIn.Load()}
	for k := range 256 {
		name := protocols.MessageKind(k).String()
		if n := c.sent[k].Load(); n > 0 {
			s.Sent[name] = n
		}
		if n := c.received[k].Load(); n > 0 {
			s.Received[name] = n
		}
	}
	for r, n := range c.dropped {
		if v := n.Load(); v > 0 {
			s.Dropped[r] = v
		}
	}
	return s
}
