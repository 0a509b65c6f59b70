package config

import (
	"time"

	"github.com/conclave-agent/conclave/phi"
)

// Config is the whole agent configuration. Its zero value is not useful:
// start from Default, then Load. The toml tags are the contract of docs/design.md §6.
type Config struct {
	Node      Node      `toml:"node"`
	Gossip    Gossip    `toml:"gossip"`
	Transport Transport `toml:"transport"`
	Detector  Detector  `toml:"detector"`
	Election  Election  `toml:"election"`
	// Elections are the named elections this agent runs besides the
	// default one ([elections.NAME], docs/elections.md).
	Elections map[string]NamedElection `toml:"elections"`
	API       API                      `toml:"api"`
	Metrics   Metrics                  `toml:"metrics"`
	Log       Log                      `toml:"log"`
	// Checks are the health checks that gate leadership ([[check]],
	// docs/health.md); Hooks the commands run on transitions ([[hook]]).
	Checks []Check `toml:"check"`
	Hooks  []Hook  `toml:"hook"`
}

// Node identifies this agent.
type Node struct {
	// Name is the node's unique, stable name: the leader name local
	// processes see, and the entry in election.voters. No default.
	Name string `toml:"name"`
	// ID is the node's unique number, 1 ≤ id < 2^20. Bully and ring order
	// nodes by it; their epochs carry it in the low 20 bits, hence the
	// bound. No default.
	ID uint64 `toml:"id"`
	// DataDir holds the durable term, vote and epoch. Relative to the
	// working directory when relative. No default.
	DataDir string `toml:"data_dir"`
	// Priority prefers this node as leader (0–255, default 0): see
	// election.preempt_delay and docs/health.md.
	Priority int `toml:"priority"`
	// Meta is a small map published with this node, given to clients as
	// leader_meta while it leads (its service address, say). At most
	// MaxMetaBytes as published (its JSON encoding).
	Meta map[string]string `toml:"meta"`
}

// Gossip configures membership (hashicorp/memberlist).
type Gossip struct {
	// Bind is the host:port memberlist listens on, TCP and UDP.
	Bind string `toml:"bind"`
	// Advertise is the host:port other members should use to reach this
	// one, when it differs from Bind (NAT, 0.0.0.0 binds). Empty: Bind.
	Advertise string `toml:"advertise"`
	// Join lists host:port addresses of any live members to join at start.
	// Empty: start a new cluster.
	Join []string `toml:"join"`
	// Key is the cluster key, standard base64 of 16, 24 or 32 bytes
	// ("agent keygen"). It encrypts gossip and admits libp2p peers. Empty:
	// no encryption, which is refused unless both gossip.bind and
	// transport.listen are loopback or Insecure is set (docs/security.md).
	Key string `toml:"key"`
	// Insecure lets an agent without a cluster key listen beyond loopback.
	// Anyone who can reach its ports can then join, claim a member's name
	// and send election messages; the agent warns every minute while it
	// runs. Default false.
	Insecure bool `toml:"insecure"`
	// Profile picks memberlist's timing preset: "lan", "local" or "wan".
	Profile string `toml:"profile"`
}

// Transport configures the libp2p host that carries election messages.
type Transport struct {
	// Listen is the libp2p multiaddr to listen on.
	Listen string `toml:"listen"`
	// Advertise is the libp2p multiaddr other members dial for election
	// messages, when it differs from Listen: behind NAT or port
	// forwarding, or with a proxy in front of the listen port. It must
	// name a TCP port and no peer id (the agent appends its own). Empty:
	// the addresses actually listened on.
	Advertise string `toml:"advertise"`
	// MaxMessageBytes bounds one election frame; larger frames are refused
	// before they are read.
	MaxMessageBytes int `toml:"max_message_bytes"`
	// IdleProbeInterval is how often at most a member this agent sends
	// nothing to is probed, which bounds how long it may take to notice
	// that such a member vanished (transport.Config.IdleProbeAfter).
	IdleProbeInterval Duration `toml:"idle_probe_interval"`
}

// Detector configures the phi-accrual failure detector.
type Detector struct {
	// HeartbeatInterval is how often the leader heartbeats every member.
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	// Threshold is the phi above which a member is suspected.
	Threshold float64 `toml:"threshold"`
	// MaxSamples is how many inter-arrival times the detector remembers.
	MaxSamples int `toml:"max_samples"`
	// MinStdDev floors the inter-arrival standard deviation, so perfectly
	// regular heartbeats do not make phi explode on the first late one.
	MinStdDev Duration `toml:"min_std_dev"`
	// AcceptablePause is added to the expected inter-arrival time: pauses
	// this long (GC, VM steal) are not suspicious.
	AcceptablePause Duration `toml:"acceptable_pause"`
}

// Protocol names for Election.Protocol.
const (
	ProtocolMajority = "majority"
	ProtocolBully    = "bully"
	ProtocolRing     = "ring"
)

// Ring algorithm names for Election.RingAlgorithm.
const (
	RingLCR      = "lcr"      // Chang-Roberts (Le Lann, Chang, Roberts)
	RingHS       = "hs"       // Hirschberg-Sinclair
	RingPeterson = "peterson" // Peterson / Dolev-Klawe-Rodeh
)

// Gossip profiles for Gossip.Profile.
const (
	ProfileLAN   = "lan"
	ProfileLocal = "local"
	ProfileWAN   = "wan"
)

// Log formats for Log.Format.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// PhiConfig returns the phi detector configuration for d: heartbeat_interval
// becomes the detector's first inter-arrival estimate.
func (d Detector) PhiConfig() phi.Config {
	return phi.Config{
		Threshold:              d.Threshold,
		MaxSamples:             d.MaxSamples,
		MinStdDev:              d.MinStdDev.Std(),
		AcceptablePause:        d.AcceptablePause.Std(),
		FirstHeartbeatEstimate: d.HeartbeatInterval.Std(),
	}
}

// Election configures the election protocol.
type Election struct {
	// Protocol is "majority", "bully" or "ring".
	Protocol string `toml:"protocol"`
	// Voters lists the names of the nodes that vote (majority only; other
	// nodes observe). Bully and ring ignore it.
	Voters []string `toml:"voters"`
	// ElectionTimeout is the base election timeout (majority randomises it
	// in [t, 2t)); bully and ring use it for their answer timeouts.
	ElectionTimeout Duration `toml:"election_timeout"`
	// PreVote makes a majority candidate first ask whether it could win,
	// so a rejoining node does not disrupt a healthy leader.
	PreVote bool `toml:"prevote"`
	// CheckQuorum makes a majority leader step down when it cannot hear a
	// majority of voters within an election timeout.
	CheckQuorum bool `toml:"check_quorum"`
	// Preempt lets a recovered higher id take over from a healthy bully
	// leader (classic bully). False keeps the sitting leader.
	Preempt bool `toml:"preempt"`
	// RingAlgorithm is "lcr", "hs" or "peterson" (ring only).
	RingAlgorithm string `toml:"ring_algorithm"`
	// PreemptDelay is how long a healthy, reachable voter of higher
	// priority must have been up and stable before the leader hands
	// leadership to it (majority), and how long a bully or ring member of
	// higher rank must have been up and eligible before it takes over from
	// a live leader. Default 5s.
	PreemptDelay Duration `toml:"preempt_delay"`
	// Candidacy is "always" (stand whenever healthy) or "session" (stand
	// only while a local process holds a session: docs/elections.md).
	Candidacy string `toml:"candidacy"`
	// SessionTTL, when not zero, is how long a session lives without a
	// check-in (candidacy = "session" only).
	SessionTTL Duration `toml:"session_ttl"`
	// Group names a fate-sharing group: the elections of one group are
	// led by the same agent and fail over together (docs/elections.md).
	// "" for none.
	Group string `toml:"group"`
}

// API configures the local Unix-socket API.
type API struct {
	// Socket is the path of the Unix socket. Relative to the working
	// directory when relative. No default.
	Socket string `toml:"socket"`
	// SocketMode is the socket file's permission bits, a quoted octal
	// string ("0660").
	SocketMode FileMode `toml:"socket_mode"`
	// MaxConnections bounds the socket's open connections; beyond it a
	// connection gets a 503. Default 512.
	MaxConnections int `toml:"max_connections"`
	// MaxWatchers bounds the open /v1/watch streams; beyond it a watch
	// request gets a 503. Default 256; at most MaxConnections.
	MaxWatchers int `toml:"max_watchers"`
	// WriteGroup names a group (or a numeric gid) whose members may change
	// the agent through the socket (resign, maint, voter changes), besides
	// root and the agent's own user. Whoever can open the socket may read.
	// Empty (the default): nobody else may write.
	WriteGroup string `toml:"write_group"`
}

// Metrics configures the optional TCP listener for Prometheus.
type Metrics struct {
	// Listen is the host:port that serves GET /metrics and the read-only
	// GET /v1/health over plain HTTP, for a Prometheus server that cannot
	// reach the Unix socket. Nothing else is served there: resign, maint
	// and voter changes stay on the socket, where the kernel names the
	// caller. Empty (the default): no TCP listener.
	Listen string `toml:"listen"`
}

// Log configures logging.
type Log struct {
	// Level is "debug", "info", "warn" or "error".
	Level string `toml:"level"`
	// Format is "json" or "console".
	Format string `toml:"format"`
}

// Default returns the built-in defaults. Node name, id, data_dir, the
// voters and the API socket have no sensible default and stay empty.
func Default() Config {
	// The detector's defaults are phi's own, so the detector and its
	// configuration cannot drift apart.
	pd := phi.DefaultConfig()
	return Config{
		Gossip: Gossip{
			Bind:    "127.0.0.1:7946",
			Profile: ProfileLAN,
		},
		Transport: Transport{
			Listen:            "/ip4/127.0.0.1/tcp/7947",
			MaxMessageBytes:   4096,
			IdleProbeInterval: Duration(5 * time.Second),
		},
		Detector: Detector{
			HeartbeatInterval: Duration(phi.DefaultHeartbeatInterval),
			Threshold:         pd.Threshold,
			MaxSamples:        pd.MaxSamples,
			MinStdDev:         Duration(pd.MinStdDev),
			AcceptablePause:   Duration(pd.AcceptablePause),
		},
		Election: Election{
			Protocol:        ProtocolMajority,
			ElectionTimeout: Duration(200 * time.Millisecond),
			PreVote:         true,
			CheckQuorum:     true,
			Preempt:         true,
			RingAlgorithm:   RingLCR,
			PreemptDelay:    Duration(5 * time.Second),
			Candidacy:       CandidacyAlways,
		},
		API: API{
			SocketMode:     0o660,
			MaxConnections: 512,
			MaxWatchers:    256,
		},
		Log: Log{
			Level:  "info",
			Format: FormatConsole,
		},
	}
}
