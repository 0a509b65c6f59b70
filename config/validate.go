package config

import (
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// MaxNodeID is the largest valid node.id. Bully and ring epochs carry the
// leader's id in their low 20 bits (so two leaders never share an epoch),
// which leaves ids 1 … 2^20-1.
const MaxNodeID = uint64(protocols.MaxEpochID)

// Bounds of transport.idle_probe_interval. Below a second an idle member
// would be probed about as often as one this agent talks to (the fast
// speed is 300 ms); above ten minutes a vanished member's reachability is
// left to gossip alone.
const (
	MinIdleProbeInterval = time.Second
	MaxIdleProbeInterval = 10 * time.Minute
)

// maxSocketPath is the portable bound on a Unix socket path: sun_path holds
// 108 bytes on Linux and 104 on the BSDs and macOS, including the NUL.
const maxSocketPath = 103

// FieldError is one invalid setting.
type FieldError struct {
	// Key is the dotted TOML key ("election.voters").
	Key string
	// Problem says what is wrong, in words.
	Problem string
	// Where is the line of the configuration file that set the value
	// ("line 12"), when Load found one.
	Where string
	// Hint says where to set a key the file does not set, when Load read
	// a file, or how to write the flag that set it.
	Hint string
	// Flag is the command-line flag that gave the value, as typed
	// ("-election.protocol=raft"), when one did: then the problem is the
	// flag's, whatever the file says.
	Flag string
}

func (e *FieldError) Error() string {
	if e.Flag != "" {
		s := "flag " + e.Flag + ": " + e.Problem
		if e.Hint != "" {
			s += " (" + e.Hint + ")"
		}
		return s
	}
	s := e.Key
	if e.Where != "" {
		s += " (" + e.Where + ")"
	}
	s += ": " + e.Problem
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// ValidationError lists every invalid setting of a Config.
type ValidationError struct {
	Problems []*FieldError
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		if e.Problems[0].Flag != "" {
			return "invalid " + e.Problems[0].Error() // "invalid flag -x=y: …"
		}
		return "invalid setting " + e.Problems[0].Error()
	}
	var b strings.Builder
	if e.onlyFlags() {
		fmt.Fprintf(&b, "%d invalid flags:", len(e.Problems))
	} else {
		fmt.Fprintf(&b, "%d invalid settings:", len(e.Problems))
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the individual *FieldErrors, for errors.As.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// onlyFlags reports whether every problem is a flag's.
func (e *ValidationError) onlyFlags() bool {
	for _, p := range e.Problems {
		if p.Flag == "" {
			return false
		}
	}
	return true
}

// Keys returns the keys of every problem, in order.
func (e *ValidationError) Keys() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Key
	}
	return out
}

type checker struct{ problems []*FieldError }

func (ch *checker) add(key, format string, args ...any) {
	ch.problems = append(ch.problems, &FieldError{Key: key, Problem: fmt.Sprintf(format, args...)})
}

// Validate checks every setting and returns a *ValidationError listing all
// problems, or nil. It does not touch the file system or the network.
func (c *Config) Validate() error {
	var ch checker
	c.validateNode(&ch)
	c.validateGossip(&ch)
	c.validateExposure(&ch)
	c.validateTransport(&ch)
	c.validateDetector(&ch)
	c.validateElection(&ch)
	c.validateAPI(&ch)
	c.validateMetrics(&ch)
	c.validateLog(&ch)
	c.validateHealth(&ch)
	if len(ch.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: ch.problems}
}

// nameProblem says what is wrong with a node name, or "". Names travel in
// gossip metadata, JSON and metric labels, so they are kept to a safe
// alphabet.
func nameProblem(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if len(name) > 64 {
		return fmt.Sprintf("%q is longer than 64 bytes", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Sprintf("%q may contain only letters, digits, '-', '_' and '.'", name)
		}
	}
	return ""
}

func (c *Config) validateNode(ch *checker) {
	if p := nameProblem(c.Node.Name); p != "" {
		ch.add("node.name", "%s", p)
	}
	if c.Node.ID == 0 || c.Node.ID > MaxNodeID {
		ch.add("node.id", "%d is out of range: must be 1 … %d (bully and ring epochs carry the id in 20 bits)", c.Node.ID, MaxNodeID)
	}
	if c.Node.DataDir == "" {
		ch.add("node.data_dir", "must not be empty: give each node a directory of its own, e.g. \"data/n1\"")
	}
}

// hostPortProblem says what is wrong with a host:port address, or "".
func hostPortProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Sprintf("%q has no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Sprintf("%q has an invalid port", addr)
	}
	return ""
}

func (c *Config) validateGossip(ch *checker) {
	if p := hostPortProblem(c.Gossip.Bind); p != "" {
		ch.add("gossip.bind", "%s", p)
	}
	if c.Gossip.Advertise != "" {
		if p := hostPortProblem(c.Gossip.Advertise); p != "" {
			ch.add("gossip.advertise", "%s", p)
		}
	}
	for i, j := range c.Gossip.Join {
		if p := hostPortProblem(j); p != "" {
			ch.add(fmt.Sprintf("gossip.join[%d]", i), "%s", p)
		}
	}
	if c.Gossip.Key != "" {
		k, err := base64.StdEncoding.DecodeString(c.Gossip.Key)
		switch {
		case err != nil:
			ch.add("gossip.key", "is not standard base64 (generate one with \"agent keygen\")")
		case len(k) != 16 && len(k) != 24 && len(k) != 32:
			ch.add("gossip.key", "decodes to %d bytes; an AES key must be 16, 24 or 32 bytes", len(k))
		}
	}
	switch c.Gossip.Profile {
	case ProfileLAN, ProfileLocal, ProfileWAN:
	default:
		ch.add("gossip.profile", "%q is not one of \"lan\", \"local\", \"wan\"", c.Gossip.Profile)
	}
}

func (c *Config) validateTransport(ch *checker) {
	// A full multiaddr parse belongs to transport/ (this package must not
	// import libp2p); catch the obvious mistakes here.
	if !strings.HasPrefix(c.Transport.Listen, "/") {
		ch.add("transport.listen", "%q is not a multiaddr such as \"/ip4/127.0.0.1/tcp/7947\"", c.Transport.Listen)
	}
	if c.Transport.Advertise != "" {
		if p := advertiseProblem(c.Transport.Advertise); p != "" {
			ch.add("transport.advertise", "%s", p)
		}
	}
	if c.Transport.MaxMessageBytes < 256 || c.Transport.MaxMessageBytes > 1<<20 {
		ch.add("transport.max_message_bytes", "%d is out of range: must be 256 … %d", c.Transport.MaxMessageBytes, 1<<20)
	}
	if d := c.Transport.IdleProbeInterval.Std(); d < MinIdleProbeInterval || d > MaxIdleProbeInterval {
		ch.add("transport.idle_probe_interval", "%s is out of range: must be %s … %s (shorter notices a vanished idle member sooner, at more probes; the default is 5s)",
			d, MinIdleProbeInterval, MaxIdleProbeInterval)
	}
}

// advertiseProblem says what is wrong with a transport.advertise multiaddr,
// or "". Other members dial it with libp2p's TCP transport, so it must be a
// host and a TCP port and nothing else: a /p2p part would be a second,
// possibly different, statement of the peer id the agent publishes itself,
// and an unspecified IP or port 0 cannot be dialled. The multiaddr package
// is not libp2p, so config may parse it fully here.
func advertiseProblem(addr string) string {
	const want = "a multiaddr of a host and a TCP port such as \"/ip4/203.0.113.7/tcp/7947\""
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return fmt.Sprintf("%q is not %s: %v", addr, want, err)
	}
	if len(m) != 2 || m[1].Code() != ma.P_TCP {
		return fmt.Sprintf("%q is not %s", addr, want)
	}
	switch host := m[0]; host.Code() {
	case ma.P_IP4, ma.P_IP6:
		if ip := net.ParseIP(host.Value()); ip == nil || ip.IsUnspecified() {
			return fmt.Sprintf("%q has an unspecified IP, which other members cannot dial", addr)
		}
	case ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
	default:
		return fmt.Sprintf("%q is not %s", addr, want)
	}
	if m[1].Value() == "0" {
		return fmt.Sprintf("%q has TCP port 0, which other members cannot dial", addr)
	}
	return ""
}

func positive(ch *checker, key string, d Duration) {
	if d <= 0 {
		ch.add(key, "%s must be positive", d)
	}
}

func (c *Config) validateDetector(ch *checker) {
	// The bounds are phi's, so a Config that validates always builds a
	// detector.
	d := c.Detector
	within := func(key string, v Duration, allowZero bool) {
		switch {
		case v < 0 || (v == 0 && !allowZero):
			if allowZero {
				ch.add(key, "%s must not be negative", v)
			} else {
				ch.add(key, "%s must be positive", v)
			}
		case v.Std() > phi.MaxDuration:
			ch.add(key, "%s is longer than %s", v, phi.MaxDuration)
		}
	}
	within("detector.heartbeat_interval", d.HeartbeatInterval, false)
	if !(d.Threshold > 0) || d.Threshold > phi.MaxThreshold {
		ch.add("detector.threshold", "%v is out of range: must be in (0, %g]", d.Threshold, float64(phi.MaxThreshold))
	}
	if d.MaxSamples < 2 || d.MaxSamples > phi.MaxMaxSamples {
		ch.add("detector.max_samples", "%d is out of range: must be 2 … %d", d.MaxSamples, phi.MaxMaxSamples)
	}
	within("detector.min_std_dev", d.MinStdDev, false)
	within("detector.acceptable_pause", d.AcceptablePause, true)
}

func (c *Config) validateElection(ch *checker) {
	c.validateElectionTable(ch, "election", c.Election)
	c.validateElections(ch)
}

// validateElectionTable checks election settings e, which the table
// named table configures ("election" or "elections.NAME").
func (c *Config) validateElectionTable(ch *checker, table string, e Election) {
	switch e.Protocol {
	case ProtocolMajority:
		if len(e.Voters) == 0 {
			hint := ""
			if c.Node.Name != "" {
				hint = fmt.Sprintf(" (e.g. [%q])", c.Node.Name)
			}
			ch.add(table+".voters", "must list at least one voter name for protocol \"majority\"%s", hint)
		}
	case ProtocolBully, ProtocolRing:
	default:
		ch.add(table+".protocol", "%q is not one of \"majority\", \"bully\", \"ring\"", e.Protocol)
	}
	seen := make(map[string]bool, len(e.Voters))
	for i, v := range e.Voters {
		key := fmt.Sprintf(table+".voters[%d]", i)
		if p := nameProblem(v); p != "" {
			ch.add(key, "%s", p)
		} else if seen[v] {
			ch.add(key, "%q is listed twice", v)
		}
		seen[v] = true
	}
	positive(ch, table+".election_timeout", e.ElectionTimeout)
	if hb := c.Detector.HeartbeatInterval; hb > 0 && e.ElectionTimeout > 0 && e.ElectionTimeout < 3*hb {
		ch.add(table+".election_timeout", "%s is shorter than 3 × detector.heartbeat_interval (%s): one late heartbeat would start an election; raise it to at least %s or shorten the heartbeat",
			e.ElectionTimeout, time.Duration(3*hb), time.Duration(3*hb))
	}
	switch e.Candidacy {
	case CandidacyAlways:
		if e.SessionTTL != 0 {
			ch.add(table+".session_ttl", "is set but %s.candidacy is %q; set candidacy = %q, or remove session_ttl", table, e.Candidacy, CandidacySession)
		}
	case CandidacySession:
		if e.SessionTTL < 0 {
			ch.add(table+".session_ttl", "%s is negative; use \"0s\" for sessions without check-ins", e.SessionTTL)
		} else if e.SessionTTL > 0 && e.SessionTTL < e.ElectionTimeout {
			ch.add(table+".session_ttl", "%s is shorter than %s.election_timeout (%s): a holder would have to check in faster than the election can react; use at least %s", e.SessionTTL, table, e.ElectionTimeout, e.ElectionTimeout)
		}
	default:
		ch.add(table+".candidacy", "%q is not one of %q, %q", e.Candidacy, CandidacyAlways, CandidacySession)
	}
	if e.Group != "" {
		if p := ElectionNameProblem(e.Group); p != "" {
			ch.add(table+".group", "a group is named as an election is: %s", p)
		}
	}
	switch e.RingAlgorithm {
	case RingLCR, RingHS, RingPeterson:
	default:
		ch.add(table+".ring_algorithm", "%q is not one of \"lcr\", \"hs\", \"peterson\"", e.RingAlgorithm)
	}
}

func (c *Config) validateAPI(ch *checker) {
	switch s := c.API.Socket; {
	case s == "":
		ch.add("api.socket", "must not be empty: set node.data_dir (the socket defaults to data_dir/agent.sock) or api.socket")
	case len(s) > maxSocketPath:
		ch.add("api.socket", "%q is %d bytes; Unix socket paths must be at most %d", s, len(s), maxSocketPath)
	}
	const maxAPIConns = 1 << 16
	if n := c.API.MaxConnections; n < 1 || n > maxAPIConns {
		ch.add("api.max_connections", "%d must be between 1 and %d", n, maxAPIConns)
	}
	if n := c.API.MaxWatchers; n < 1 || n > c.API.MaxConnections {
		ch.add("api.max_watchers", "%d must be between 1 and api.max_connections (%d): each watcher holds a connection", n, c.API.MaxConnections)
	}
	if g := c.API.WriteGroup; g != "" && (len(g) > 32 || strings.ContainsFunc(g, func(r rune) bool { return r <= ' ' || r == ':' || r == ',' || r > '~' })) {
		ch.add("api.write_group", "%q is not a group name or gid (at most 32 printable characters, no spaces, ':' or ',')", g)
	}
	if m := c.API.SocketMode; m > 0o777 {
		ch.add("api.socket_mode", "%s has bits beyond 0777", m)
	} else if m&0o600 != 0o600 {
		ch.add("api.socket_mode", "%s must give the owner read and write (0600), or the agent's own CLI cannot connect", m)
	}
}

func (c *Config) validateMetrics(ch *checker) {
	if l := c.Metrics.Listen; l != "" {
		if p := hostPortProblem(l); p != "" {
			ch.add("metrics.listen", "%s: give a host:port such as \"127.0.0.1:9947\", or \"\" for no TCP listener", p)
		}
	}
}

func (c *Config) validateLog(ch *checker) {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		ch.add("log.level", "%q is not one of \"debug\", \"info\", \"warn\", \"error\"", c.Log.Level)
	}
	switch c.Log.Format {
	case FormatJSON, FormatConsole:
	default:
		ch.add("log.format", "%q is not one of \"json\", \"console\"", c.Log.Format)
	}
}
