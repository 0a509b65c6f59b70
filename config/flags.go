package config

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Flags holds command-line overrides. Every configuration key has a flag
// named after its dotted key ("-node.name", "-election.protocol",
// "-api.socket_mode"); lists take comma-separated values
// ("-election.voters=n1,n2,n3") and replace the file's list.
//
// The flags are parsed before the file is read (the file's path is itself a
// flag), so they record overrides instead of writing into a Config; Apply
// replays only the flags that were given, after the file, which is what
// makes the order defaults → file → flags hold.
type Flags struct {
	applied []func(*Config)   // in command-line order
	given   map[string]string // key → the value last given, as typed
	lists   map[string]bool   // the keys whose flag takes a list
}

// flagFor returns the flag that set key, as typed ("-election.protocol=raft"),
// and whether one did. A list item's key ("election.voters[1]") is the
// list's.
func (f *Flags) flagFor(key string) (string, bool) {
	if f == nil {
		return "", false
	}
	base, _, _ := strings.Cut(key, "[")
	v, ok := f.given[base]
	if !ok {
		return "", false
	}
	if strings.ContainsFunc(v, unicode.IsSpace) || v == "" {
		v = strconv.Quote(v) // as a shell would need it
	}
	return "-" + base + "=" + v, true
}

// RegisterFlags defines one flag per configuration key on fs and returns
// the Flags that collects them. Pass (*Flags).Apply to Load after fs.Parse.
// Bad values (an unparsable duration) are reported by fs.Parse, naming the
// flag.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{given: map[string]string{}, lists: map[string]bool{}}
	str := func(key, usage string, field func(*Config) *string) {
		register(fs, f, key, usage, func(s string) (string, error) { return s, nil }, field)
	}
	list := func(key, usage string, field func(*Config) *[]string) {
		f.lists[key] = true
		register(fs, f, key, usage, parseList, field)
	}
	dur := func(key, usage string, field func(*Config) *Duration) {
		register(fs, f, key, usage, func(s string) (Duration, error) {
			var d Duration
			err := d.UnmarshalText([]byte(s))
			return d, err
		}, field)
	}
	boolean := func(key, usage string, field func(*Config) *bool) {
		register(fs, f, key, usage, strconv.ParseBool, field)
	}
	integer := func(key, usage string, field func(*Config) *int) {
		register(fs, f, key, usage, strconv.Atoi, field)
	}

	str("node.name", "unique, stable node name", func(c *Config) *string { return &c.Node.Name })
	register(fs, f, "node.id", "unique node id, 1 … 2^20-1", func(s string) (uint64, error) {
		return strconv.ParseUint(s, 10, 64)
	}, func(c *Config) *uint64 { return &c.Node.ID })
	str("node.data_dir", "directory for durable state (relative to the working directory)", func(c *Config) *string { return &c.Node.DataDir })
	integer("node.priority", "leadership priority, 0 … 255 (higher is preferred)", func(c *Config) *int { return &c.Node.Priority })
	register(fs, f, "node.meta", "comma-separated key=value pairs published as leader_meta", parseMeta, func(c *Config) *map[string]string { return &c.Node.Meta })

	str("gossip.bind", "gossip host:port (TCP and UDP)", func(c *Config) *string { return &c.Gossip.Bind })
	str("gossip.advertise", "gossip host:port other members use, if not bind", func(c *Config) *string { return &c.Gossip.Advertise })
	list("gossip.join", "comma-separated host:port of members to join", func(c *Config) *[]string { return &c.Gossip.Join })
	str("gossip.key", "cluster key, base64 of 16, 24 or 32 bytes", func(c *Config) *string { return &c.Gossip.Key })
	boolean("gossip.insecure", "allow a non-loopback bind without gossip.key (unsafe: docs/security.md)", func(c *Config) *bool { return &c.Gossip.Insecure })
	str("gossip.profile", "memberlist preset: lan, local or wan", func(c *Config) *string { return &c.Gossip.Profile })

	str("transport.listen", "libp2p listen multiaddr", func(c *Config) *string { return &c.Transport.Listen })
	str("transport.advertise", "libp2p multiaddr other members dial, if not listen", func(c *Config) *string { return &c.Transport.Advertise })
	integer("transport.max_message_bytes", "largest election frame accepted", func(c *Config) *int { return &c.Transport.MaxMessageBytes })
	dur("transport.idle_probe_interval", "how often a member this agent sends nothing to is probed", func(c *Config) *Duration { return &c.Transport.IdleProbeInterval })

	dur("detector.heartbeat_interval", "leader heartbeat interval", func(c *Config) *Duration { return &c.Detector.HeartbeatInterval })
	register(fs, f, "detector.threshold", "phi suspicion threshold", func(s string) (float64, error) {
		return strconv.ParseFloat(s, 64)
	}, func(c *Config) *float64 { return &c.Detector.Threshold })
	integer("detector.max_samples", "inter-arrival samples kept", func(c *Config) *int { return &c.Detector.MaxSamples })
	dur("detector.min_std_dev", "floor of the inter-arrival standard deviation", func(c *Config) *Duration { return &c.Detector.MinStdDev })
	dur("detector.acceptable_pause", "pause not counted as suspicious", func(c *Config) *Duration { return &c.Detector.AcceptablePause })

	str("election.protocol", "majority, bully or ring", func(c *Config) *string { return &c.Election.Protocol })
	list("election.voters", "comma-separated voter names (majority)", func(c *Config) *[]string { return &c.Election.Voters })
	dur("election.election_timeout", "base election timeout", func(c *Config) *Duration { return &c.Election.ElectionTimeout })
	boolean("election.prevote", "majority: PreVote before campaigning", func(c *Config) *bool { return &c.Election.PreVote })
	boolean("election.check_quorum", "majority: leader steps down without a quorum", func(c *Config) *bool { return &c.Election.CheckQuorum })
	boolean("election.preempt", "bully: a recovered higher id takes over", func(c *Config) *bool { return &c.Election.Preempt })
	str("election.ring_algorithm", "ring: lcr, hs or peterson", func(c *Config) *string { return &c.Election.RingAlgorithm })
	str("election.candidacy", "always, or session: stand only while a local process holds a session", func(c *Config) *string { return &c.Election.Candidacy })
	dur("election.session_ttl", "with candidacy = session: how long a session lives without a check-in (0: no check-in)", func(c *Config) *Duration { return &c.Election.SessionTTL })
	str("election.group", "fate-sharing group: its elections are led by one agent and fail over together", func(c *Config) *string { return &c.Election.Group })
	dur("election.preempt_delay", "how long a node of higher priority must be stable before it takes over", func(c *Config) *Duration { return &c.Election.PreemptDelay })

	elections := &fieldFlag{flags: f, key: "elections", parse: func(s string) (func(*Config), error) {
		apply, err := parseElectionFlag(s)
		if err != nil {
			return nil, fmt.Errorf("invalid value for elections: %w", err)
		}
		return apply, nil
	}}
	fs.Var(elections, "elections", "NAME.KEY=VALUE: set a key of [elections.NAME] (repeat the flag for each key)")

	str("api.socket", "Unix socket path (default data_dir/agent.sock)", func(c *Config) *string { return &c.API.Socket })
	register(fs, f, "api.socket_mode", "socket permission bits, octal", func(s string) (FileMode, error) {
		var m FileMode
		err := m.UnmarshalText([]byte(s))
		return m, err
	}, func(c *Config) *FileMode { return &c.API.SocketMode })
	integer("api.max_connections", "socket connections open at once; beyond, 503", func(c *Config) *int { return &c.API.MaxConnections })
	str("api.write_group", "group whose members may resign, maint and change voters through the socket", func(c *Config) *string { return &c.API.WriteGroup })
	integer("api.max_watchers", "watch streams open at once; beyond, 503", func(c *Config) *int { return &c.API.MaxWatchers })

	str("metrics.listen", "host:port serving /metrics and /v1/health over HTTP (default off)", func(c *Config) *string { return &c.Metrics.Listen })

	str("log.level", "debug, info, warn or error", func(c *Config) *string { return &c.Log.Level })
	str("log.format", "json or console", func(c *Config) *string { return &c.Log.Format })
	return f
}

// Load is the package's Load with these flags as the last layer. A
// problem with a value a flag gave is reported against the flag, not the
// file.
func (f *Flags) Load(path string) (Config, error) {
	return load(path, f, f.Apply)
}

// Apply writes the flags given on the command line into c, in command-line
// order (a repeated flag: the last one wins). Flags not given leave c as it
// is.
func (f *Flags) Apply(c *Config) {
	for _, a := range f.applied {
		a(c)
	}
}

func parseList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

// fieldFlag is a flag.Value that records an override instead of storing a
// value.
type fieldFlag struct {
	flags  *Flags
	key    string
	def    string
	isBool bool
	parse  func(string) (func(*Config), error)
}

// String returns the default shown by -help. The flag package calls it on a
// zero fieldFlag too.
func (v *fieldFlag) String() string {
	if v == nil {
		return ""
	}
	return v.def
}

func (v *fieldFlag) Set(s string) error {
	apply, err := v.parse(s)
	if err != nil {
		return err
	}
	v.flags.applied = append(v.flags.applied, apply)
	v.flags.given[v.key] = s
	return nil
}

// IsBoolFlag lets boolean keys be given as "-election.prevote" alone.
func (v *fieldFlag) IsBoolFlag() bool { return v.isBool }

func register[T any](fs *flag.FlagSet, f *Flags, key, usage string, parse func(string) (T, error), field func(*Config) *T) {
	d := Default()
	v := &fieldFlag{flags: f, key: key, def: formatDefault(*field(&d))}
	_, v.isBool = any(*field(&d)).(bool)
	v.parse = func(s string) (func(*Config), error) {
		x, err := parse(s)
		if err != nil {
			return nil, fmt.Errorf("invalid value for %s: %w", key, err)
		}
		return func(c *Config) { *field(c) = x }, nil
	}
	fs.Var(v, key, usage)
}

// formatMeta writes a map as its flag takes it: key=value,… in key order.
func formatMeta(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

// listHint says how a list flag is written, from value as given: items
// separated by commas. Spaces alone do not separate them, and that is the
// likely mistake when an item is refused.
func listHint(key, value string) string {
	items := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if strings.ContainsFunc(strings.TrimSpace(value), unicode.IsSpace) {
		return fmt.Sprintf("-%s takes a comma-separated list; separate the items with commas, not spaces: -%s=%s", key, key, strings.Join(items, ","))
	}
	return fmt.Sprintf("-%s takes a comma-separated list", key)
}

func formatDefault(x any) string {
	switch x := x.(type) {
	case []string:
		return strings.Join(x, ",")
	case map[string]string:
		return formatMeta(x)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
