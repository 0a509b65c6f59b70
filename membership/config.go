package membership

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// Gossip profiles: memberlist's presets, chosen by [gossip] profile.
const (
	// ProfileLAN suits a data centre network (memberlist's LAN preset).
	ProfileLAN = "lan"
	// ProfileLocal suits one host or a fast local network: shorter probes
	// and gossip intervals.
	ProfileLocal = "local"
	// ProfileWAN tolerates high latency and loss between sites.
	ProfileWAN = "wan"
)

// DefaultReclaimTime is how long a dead member's name stays bound to its
// old address. After it, a node restarted under the same name on a new port
// is accepted; before it, memberlist refuses the new address.
const DefaultReclaimTime = 5 * time.Second

// DefaultReapAfter is how long a dead or left member stays listed (and
// asked to rejoin, when dead): long enough to ride out a day-long outage,
// as Serf's reconnect timeout.
const DefaultReapAfter = 24 * time.Hour

// DefaultMaxDown bounds the dead and left members kept, so churn of names
// (hosts replaced under new names) cannot grow the list without bound.
const DefaultMaxDown = 1024

// Config configures Start. Name, ID and Bind are required.
type Config struct {
	// Name is this node's unique, stable name.
	Name string
	// ID is this node's unique numeric id; it must not be zero.
	ID protocols.ID
	// Bind is the host:port memberlist listens on, TCP and UDP. Port 0
	// picks a free port (see LocalAddr).
	Bind string
	// Advertise is the host:port peers should use to reach this node, when
	// it differs from Bind (NAT, 0.0.0.0 binds). The host must be an IP.
	Advertise string
	// Join lists members to join through. Joining is retried with backoff
	// in the background until one attempt succeeds or the membership is
	// shut down; an empty list starts a new cluster.
	Join []string
	// Key, when set, encrypts gossip (AES, 16, 24 or 32 bytes; see
	// ParseKey). Nodes with different keys cannot join each other.
	Key []byte
	// Keys, when set, replaces Key: the installed cluster keys, primary
	// first. Gossip is encrypted with the primary and decrypted with any
	// of them; Keyring changes them at run time.
	Keys [][]byte
	// Profile is ProfileLAN (the default when empty), ProfileLocal or
	// ProfileWAN.
	Profile string
	// PeerID and PeerAddr are this node's libp2p peer id and multiaddr.
	PeerID   string
	PeerAddr string
	// UserMeta is published with this node for peers to read in
	// Member.UserMeta (the agent's node.meta); opaque to membership.
	UserMeta string
	// Priority is published with this node for peers to read in
	// Member.Priority (the agent's node.priority), so that bully and ring
	// rank it before they hear from it.
	Priority uint8
	// ElectionPriorities is published for peers to read with
	// Member.PriorityIn: this node's priority in the named elections
	// where it differs from Priority. At most MaxElectionPrioritiesLen
	// bytes encoded.
	ElectionPriorities map[string]uint8
	// Elections names the named elections this node runs, published as a
	// bitmap (ElectionsBitmap) for peers to read with Member.MayRun, so
	// that an election counts only the members that run it.
	Elections []string
	// Logger receives memberlist's log lines at their levels under the
	// name "memberlist"; nil discards them.
	Logger *zap.Logger
	// EventBuffer bounds the events held for a slow consumer; 0 means
	// DefaultEventBuffer. See Events for what happens on overflow.
	EventBuffer int
	// ReclaimTime is DeadNodeReclaimTime: 0 means DefaultReclaimTime.
	ReclaimTime time.Duration
	// ReconnectInterval is how often one member last known as dead is
	// asked to join again; 0 means DefaultReconnectInterval.
	ReconnectInterval time.Duration
	// SnapshotPath, when set, is the member snapshot file (usually
	// SnapshotFile in the data directory): the members this node knew are
	// kept there as they come and go, and on start it joins them as well
	// as Join, so a restarted node finds the cluster without a join list.
	SnapshotPath string
	// ReapAfter is how long a dead or left member stays listed before it
	// is forgotten (EventReap); 0 means DefaultReapAfter.
	ReapAfter time.Duration
	// MaxDown bounds the dead and left members listed; beyond it the
	// longest gone are reaped at once. 0 means DefaultMaxDown.
	MaxDown int

	// tune, when set, adjusts memberlist's configuration last (tests shrink
	// timings with it).
	tune func(*memberlist.Config)
	// joinBackoff and joinBackoffMax override the join retry backoff.
	joinBackoff, joinBackoffMax time.Duration
}

// memberlistConfig validates c and builds memberlist's configuration.
func (c *Config) memberlistConfig() (*memberlist.Config, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("membership: node name is empty")
	}
	if c.ID == protocols.None {
		return nil, fmt.Errorf("membership: node id must not be 0")
	}
	var mc *memberlist.Config
	switch c.Profile {
	case "", ProfileLAN:
		mc = memberlist.DefaultLANConfig()
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
		// The local preset retransmits each broadcast only 2*log(N+1)
		// times; joins of many nodes at once were lost and 50 nodes took
		// 41–63 s to converge on the test machine. The LAN value converges
		// them in about a second.
		mc.RetransmitMult = 4
	case ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	default:
		return nil, fmt.Errorf("membership: unknown gossip profile %q (want %q, %q or %q)", c.Profile, ProfileLAN, ProfileLocal, ProfileWAN)
	}
	mc.Name = c.Name
	// Our gossip messages are a few hundred bytes of node metadata and
	// member states: LZW saves next to nothing on them, yet each
	// compressed message allocates a fresh LZW table (64 KiB), which
	// was the largest allocation of an idle agent. Receivers decode
	// compressed and plain messages alike, so agents with and without this
	// still talk to each other.
	mc.EnableCompression = false
	if c.Bind == "" {
		return nil, fmt.Errorf("membership: bind address is empty")
	}
	host, port, err := splitHostPort(c.Bind)
	if err != nil {
		return nil, fmt.Errorf("membership: bind address: %w", err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if c.Advertise != "" {
		host, port, err := splitHostPort(c.Advertise)
		if err != nil {
			return nil, fmt.Errorf("membership: advertise address: %w", err)
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("membership: advertise address %q: host must be an IP address", c.Advertise)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	switch {
	case len(c.Keys) > 0:
		for _, k := range c.Keys {
			if err := checkKeyLen(len(k)); err != nil {
				return nil, err
			}
		}
		kr, err := memberlist.NewKeyring(c.Keys[1:], c.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("membership: keyring: %w", err)
		}
		mc.Keyring = kr
	case len(c.Key) > 0:
		if err := checkKeyLen(len(c.Key)); err != nil {
			return nil, err
		}
		mc.SecretKey = c.Key
	}
	mc.DeadNodeReclaimTime = c.ReclaimTime
	if mc.DeadNodeReclaimTime <= 0 {
		mc.DeadNodeReclaimTime = DefaultReclaimTime
	}
	return mc, nil
}

func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", s, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: bad port: %w", s, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, int(port), nil
}
