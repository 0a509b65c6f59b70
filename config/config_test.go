package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/phi"
)

// minimal is the smallest valid file: the keys without defaults.
const minimal = `
[node]
name = "n1"
id = 1
data_dir = "data/n1"
[election]
voters = ["n1"]
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := Load(writeFile(t, minimal))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.Node = Node{Name: "n1", ID: 1, DataDir: "data/n1"}
	want.Election.Voters = []string{"n1"}
	want.API.Socket = filepath.Join("data/n1", "agent.sock")
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Load(minimal) =\n%+v\nwant\n%+v", c, want)
	}
	// Spot-check the documented defaults, so a changed Default() is noticed.
	checks := []struct {
		name      string
		got, want any
	}{
		{"heartbeat_interval", c.Detector.HeartbeatInterval.Std(), 50 * time.Millisecond},
		{"threshold", c.Detector.Threshold, phi.DefaultConfig().Threshold},
		{"max_samples", c.Detector.MaxSamples, phi.DefaultConfig().MaxSamples},
		{"min_std_dev", c.Detector.MinStdDev.Std(), phi.DefaultConfig().MinStdDev},
		{"acceptable_pause", c.Detector.AcceptablePause.Std(), phi.DefaultConfig().AcceptablePause},
		{"protocol", c.Election.Protocol, "majority"},
		{"election_timeout", c.Election.ElectionTimeout.Std(), 200 * time.Millisecond},
		{"prevote", c.Election.PreVote, true},
		{"check_quorum", c.Election.CheckQuorum, true},
		{"preempt", c.Election.Preempt, true},
		{"ring_algorithm", c.Election.RingAlgorithm, "lcr"},
		{"listen", c.Transport.Listen, "/ip4/127.0.0.1/tcp/7947"},
		{"max_message_bytes", c.Transport.MaxMessageBytes, 4096},
		{"idle_probe_interval", c.Transport.IdleProbeInterval, Duration(5 * time.Second)},
		{"transport advertise", c.Transport.Advertise, ""},
		{"bind", c.Gossip.Bind, "127.0.0.1:7946"},
		{"profile", c.Gossip.Profile, "lan"},
		{"socket_mode", c.API.SocketMode.Perm(), os.FileMode(0o660)},
		{"level", c.Log.Level, "info"},
		{"format", c.Log.Format, "console"},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("default %s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestUnknownKeyNamesKeyAndFile(t *testing.T) {
	p := writeFile(t, strings.Replace(minimal, `voters = ["n1"]`, "voters = [\"n1\"]\nelecton_timeout = \"2s\"", 1)+"[nodes]\nx = 1\n")
	_, err := Load(p)
	var uk *UnknownKeysError
	if !errors.As(err, &uk) {
		t.Fatalf("Load: got %v, want *UnknownKeysError", err)
	}
	if uk.File != p {
		t.Errorf("File = %q, want %q", uk.File, p)
	}
	for _, k := range []string{"election.electon_timeout", "nodes"} {
		if !slices.Contains(uk.Keys, k) {
			t.Errorf("Keys = %q, want it to contain %q", uk.Keys, k)
		}
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not name key %q", err, k)
		}
	}
	if slices.Contains(uk.Keys, "nodes.x") {
		t.Errorf("Keys = %q: the keys inside an unknown table are one mistake, reported as the table", uk.Keys)
	}
	if !strings.Contains(err.Error(), p) {
		t.Errorf("error %q does not name file %q", err, p)
	}
}

func TestSeveralInvalidValuesReportedTogether(t *testing.T) {
	p := writeFile(t, `
[node]
name = ""
id = 1048576
data_dir = "d"
[gossip]
key = "c2hvcnQ="
profile = "moon"
[detector]
heartbeat_interval = "500ms"
[election]
protocol = "majority"
voters = ["a", "a"]
election_timeout = "1s"
ring_algorithm = "xyz"
[api]
socket_mode = "0066"
[log]
format = "yaml"
`)
	_, err := Load(p)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Load: got %v, want *ValidationError", err)
	}
	want := []string{
		"node.name", "node.id", "gossip.key", "gossip.profile",
		"election.voters[1]", "election.election_timeout",
		"election.ring_algorithm", "api.socket_mode", "log.format",
	}
	if got := ve.Keys(); !slices.Equal(got, want) {
		t.Errorf("problem keys = %q\nwant %q", got, want)
	}
	for _, k := range want {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error text does not mention %s:\n%v", k, err)
		}
	}
	if !strings.Contains(err.Error(), p) {
		t.Errorf("error %q does not name the file", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Key != "node.name" {
		t.Errorf("errors.As(*FieldError) = %v, want the node.name problem first", fe)
	}
}

func TestValidateRules(t *testing.T) {
	valid := func() Config {
		c := Default()
		c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
		c.Election.Voters = []string{"n1"}
		c.API.Socket = "d/agent.sock"
		return c
	}
	if err := func() error { c := valid(); return c.Validate() }(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		key    string
		mutate func(*Config)
	}{
		{"node.id", func(c *Config) { c.Node.ID = 0 }},
		{"node.id", func(c *Config) { c.Node.ID = MaxNodeID + 1 }},
		{"node.name", func(c *Config) { c.Node.Name = "has space" }},
		{"node.data_dir", func(c *Config) { c.Node.DataDir = "" }},
		{"gossip.bind", func(c *Config) { c.Gossip.Bind = "127.0.0.1" }},
		{"gossip.advertise", func(c *Config) { c.Gossip.Advertise = "h:99999" }},
		{"gossip.join[1]", func(c *Config) { c.Gossip.Join = []string{"a:1", "nope"} }},
		{"gossip.key", func(c *Config) { c.Gossip.Key = "!!!" }},
		{"transport.listen", func(c *Config) { c.Transport.Listen = "127.0.0.1:7947" }},
		{"transport.max_message_bytes", func(c *Config) { c.Transport.MaxMessageBytes = 0 }},
		{"transport.idle_probe_interval", func(c *Config) { c.Transport.IdleProbeInterval = Duration(500 * time.Millisecond) }},
		{"transport.idle_probe_interval", func(c *Config) { c.Transport.IdleProbeInterval = Duration(time.Hour) }},
		{"transport.advertise", func(c *Config) { c.Transport.Advertise = "127.0.0.1:7947" }},
		{"detector.heartbeat_interval", func(c *Config) { c.Detector.HeartbeatInterval = 0 }},
		{"detector.threshold", func(c *Config) { c.Detector.Threshold = -1 }},
		{"detector.max_samples", func(c *Config) { c.Detector.MaxSamples = 1 }},
		{"detector.min_std_dev", func(c *Config) { c.Detector.MinStdDev = -1 }},
		{"detector.acceptable_pause", func(c *Config) { c.Detector.AcceptablePause = -1 }},
		{"election.protocol", func(c *Config) { c.Election.Protocol = "raft" }},
		{"election.voters", func(c *Config) { c.Election.Voters = nil }},
		{"election.election_timeout", func(c *Config) { c.Election.ElectionTimeout = Duration(149 * time.Millisecond) }},
		{"api.socket", func(c *Config) { c.API.Socket = "" }},
		{"api.socket", func(c *Config) { c.API.Socket = strings.Repeat("s", 104) }},
		{"api.socket_mode", func(c *Config) { c.API.SocketMode = 0o200 }},
		{"log.level", func(c *Config) { c.Log.Level = "trace" }},
		{"gossip.key", func(c *Config) { c.Gossip.Bind = "0.0.0.0:7946" }},
		{"gossip.key", func(c *Config) { c.Gossip.Bind = "192.0.2.1:7946" }},
		{"gossip.key", func(c *Config) { c.Gossip.Bind = "host.example:7946" }},
		{"gossip.key", func(c *Config) { c.Transport.Listen = "/ip4/0.0.0.0/tcp/7947" }},
		{"gossip.key", func(c *Config) { c.Transport.Listen = "/ip6/::/tcp/7947" }},
		{"gossip.key", func(c *Config) {
			c.Gossip.Bind, c.Transport.Listen = "0.0.0.0:7946", "/ip4/0.0.0.0/tcp/7947"
		}},
	}
	for _, tc := range cases {
		c := valid()
		tc.mutate(&c)
		err := c.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || !slices.Equal(ve.Keys(), []string{tc.key}) {
			t.Errorf("%s: Validate = %v, want exactly one problem at %s", tc.key, err, tc.key)
		}
	}
	// Accepted edge values.
	for name, mutate := range map[string]func(*Config){
		"bully without voters":   func(c *Config) { c.Election.Protocol = "bully"; c.Election.Voters = nil },
		"max id":                 func(c *Config) { c.Node.ID = MaxNodeID },
		"32-byte key":            func(c *Config) { c.Gossip.Key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" },
		"timeout exactly 3×hb":   func(c *Config) { c.Election.ElectionTimeout = Duration(300 * time.Millisecond) },
		"ipv6 bind":              func(c *Config) { c.Gossip.Bind = "[::1]:7946" },
		"socket mode owner only": func(c *Config) { c.API.SocketMode = 0o600 },
		"ring peterson":          func(c *Config) { c.Election.Protocol = "ring"; c.Election.RingAlgorithm = RingPeterson },
		"localhost bind":         func(c *Config) { c.Gossip.Bind = "localhost:7946" },
		"other loopback":         func(c *Config) { c.Transport.Listen = "/ip4/127.0.0.2/tcp/7947" },
		"ipv6 loopback listen":   func(c *Config) { c.Transport.Listen = "/ip6/::1/tcp/7947" },
		"wildcard with key": func(c *Config) {
			c.Gossip.Bind, c.Transport.Listen = "0.0.0.0:7946", "/ip4/0.0.0.0/tcp/7947"
			c.Gossip.Key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
		},
		"wildcard insecure": func(c *Config) {
			c.Gossip.Bind, c.Transport.Listen = "0.0.0.0:7946", "/ip4/0.0.0.0/tcp/7947"
			c.Gossip.Insecure = true
		},
	} {
		c := valid()
		mutate(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate = %v, want nil", name, err)
		}
	}
}

func TestTransportAdvertise(t *testing.T) {
	base := func() Config {
		c := Default()
		c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
		c.Election.Voters = []string{"n1"}
		c.API.Socket = "d/agent.sock"
		return c
	}
	for _, good := range []string{
		"",
		"/ip4/203.0.113.7/tcp/7947",
		"/ip6/2001:db8::1/tcp/7947",
		"/dns4/agent1.example.com/tcp/17947",
		"/dns/agent1.example.com/tcp/7947",
	} {
		c := base()
		c.Transport.Advertise = good
		if err := c.Validate(); err != nil {
			t.Errorf("advertise %q: Validate = %v, want nil", good, err)
		}
	}
	for bad, why := range map[string]string{
		"127.0.0.1:7947":                  "not a multiaddr",
		"/ip4/127.0.0.1":                  "no TCP port",
		"/ip4/127.0.0.1/udp/7947/quic-v1": "not TCP",
		"/ip4/127.0.0.1/tcp/70000":        "port out of range",
		"/ip4/127.0.0.1/tcp/0":            "port 0",
		"/ip4/0.0.0.0/tcp/7947":           "unspecified IP",
		"/ip6/::/tcp/7947":                "unspecified IP",
		"/ip4/127.0.0.1/tcp/7947/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA": "peer id",
		"/ip4/127.0.0.1/tcp/7947/ws": "another transport",
		"/unix/tmp/agent.sock":       "not TCP",
		"/tcp/7947":                  "no host",
	} {
		c := base()
		c.Transport.Advertise = bad
		err := c.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || !slices.Equal(ve.Keys(), []string{"transport.advertise"}) {
			t.Errorf("advertise %q (%s): Validate = %v, want exactly one problem at transport.advertise", bad, why, err)
			continue
		}
		if !strings.Contains(err.Error(), "transport.advertise") || !strings.Contains(err.Error(), bad) {
			t.Errorf("advertise %q (%s): error %q does not name the key and the value", bad, why, err)
		}
	}

	// From the file, overridden by the flag.
	p := writeFile(t, minimal+"[transport]\nadvertise = \"/ip4/198.51.100.1/tcp/9000\"\n")
	c, err := Load(p)
	if err != nil || c.Transport.Advertise != "/ip4/198.51.100.1/tcp/9000" {
		t.Fatalf("Load with transport.advertise: %q, %v", c.Transport.Advertise, err)
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl := RegisterFlags(fs)
	if err := fs.Parse([]string{"-transport.advertise=/ip4/198.51.100.2/tcp/9001"}); err != nil {
		t.Fatal(err)
	}
	if c, err = Load(p, fl.Apply); err != nil || c.Transport.Advertise != "/ip4/198.51.100.2/tcp/9001" {
		t.Errorf("flag -transport.advertise: %q, %v", c.Transport.Advertise, err)
	}
	p = writeFile(t, minimal+"[transport]\nadvertise = \"198.51.100.3:7947\"\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "transport.advertise") || !strings.Contains(err.Error(), p) {
		t.Errorf("bad advertise in a file: %v, want an error naming the file and the key", err)
	}
}

func TestPhiConfigValidates(t *testing.T) {
	d := Default().Detector
	pc := d.PhiConfig()
	if err := pc.Validate(); err != nil {
		t.Fatalf("default detector is not a valid phi.Config: %v", err)
	}
	want := phi.DefaultConfig()
	if pc != want {
		t.Errorf("PhiConfig() = %+v, want phi.DefaultConfig() %+v", pc, want)
	}
	// Any detector section that passes Validate builds a detector.
	c := Default()
	c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
	c.Election.Voters, c.API.Socket = []string{"n1"}, "s"
	c.Detector = Detector{HeartbeatInterval: Duration(phi.MaxDuration), Threshold: phi.MaxThreshold, MaxSamples: phi.MaxMaxSamples, MinStdDev: Duration(phi.MaxDuration), AcceptablePause: Duration(phi.MaxDuration)}
	c.Election.ElectionTimeout = Duration(3 * phi.MaxDuration)
	if err := c.Validate(); err != nil {
		t.Fatalf("extreme valid detector: %v", err)
	}
	if err := c.Detector.PhiConfig().Validate(); err != nil {
		t.Errorf("config accepts what phi refuses: %v", err)
	}
	c.Detector.MaxSamples = phi.MaxMaxSamples + 1
	c.Detector.MinStdDev = Duration(phi.MaxDuration + 1)
	var ve *ValidationError
	if err := c.Validate(); !errors.As(err, &ve) || !slices.Equal(ve.Keys(), []string{"detector.max_samples", "detector.min_std_dev"}) {
		t.Errorf("beyond phi's bounds: %v", err)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	p := writeFile(t, minimal+`
[log]
level = "debug"
`)
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl := RegisterFlags(fs)
	err := fs.Parse([]string{
		"-node.name=n2", "-node.id=2",
		"-election.voters", "n1, n2,n3",
		"-election.prevote=false",
		"-detector.heartbeat_interval=50ms",
		"-api.socket_mode=0600",
		"-log.level=warn", "-log.level=error", // last one wins
	})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	c, err := Load(p, fl.Apply)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Node.Name != "n2" || c.Node.ID != 2 {
		t.Errorf("node = %+v, want name n2 id 2", c.Node)
	}
	if c.Node.DataDir != "data/n1" {
		t.Errorf("data_dir = %q: a flag not given must keep the file's value", c.Node.DataDir)
	}
	if !slices.Equal(c.Election.Voters, []string{"n1", "n2", "n3"}) {
		t.Errorf("voters = %q", c.Election.Voters)
	}
	if c.Election.PreVote {
		t.Error("prevote: flag false did not override the default true")
	}
	if c.Detector.HeartbeatInterval.Std() != 50*time.Millisecond {
		t.Errorf("heartbeat_interval = %v", c.Detector.HeartbeatInterval)
	}
	if c.API.SocketMode != 0o600 {
		t.Errorf("socket_mode = %v", c.API.SocketMode)
	}
	if c.Log.Level != "error" {
		t.Errorf("log.level = %q, want the last flag (error) over the file (debug)", c.Log.Level)
	}
}

func TestFlagsWithoutFile(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl := RegisterFlags(fs)
	if err := fs.Parse([]string{"-node.name=x", "-node.id=7", "-node.data_dir=/tmp/x", "-election.protocol=ring"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load("", fl.Apply)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.API.Socket != "/tmp/x/agent.sock" {
		t.Errorf("derived socket = %q", c.API.Socket)
	}
}

func TestFlagBadValue(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	RegisterFlags(fs)
	for _, arg := range []string{"-detector.min_std_dev=50", "-node.id=-1", "-api.socket_mode=rw", "-election.prevote=maybe"} {
		err := fs.Parse([]string{arg})
		if err == nil {
			t.Errorf("Parse(%s) = nil, want error", arg)
			continue
		}
		name := strings.TrimPrefix(strings.SplitN(arg, "=", 2)[0], "-")
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Parse(%s) = %v, want the flag named", arg, err)
		}
	}
}

func TestEveryKeyHasAFlag(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	RegisterFlags(fs)
	for _, key := range allKeys(reflect.TypeFor[Config](), "") {
		if fs.Lookup(key) == nil {
			t.Errorf("no flag for key %s", key)
		}
	}
}

// allKeys lists the dotted TOML keys of t.
func allKeys(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		key := prefix + f.Tag.Get("toml")
		if f.Type.Kind() == reflect.Struct {
			out = append(out, allKeys(f.Type, key+".")...)
		} else if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			// [[check]] and [[hook]]: arrays of tables, no flag, shown
			// commented out in the example (config/health_test.go).
		} else {
			out = append(out, key)
		}
	}
	return out
}

// An agent listening beyond loopback without a key is refused with a
// message that names both keys, what it binds and how to make a key; the
// warning an insecure agent repeats names the exposed settings.
func TestExposedWithoutKeyMessage(t *testing.T) {
	c := Default()
	c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
	c.Election.Voters = []string{"n1"}
	c.API.Socket = "d/agent.sock"
	c.Gossip.Bind, c.Transport.Listen = "0.0.0.0:17946", "/ip4/0.0.0.0/tcp/17947"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a wildcard bind without a key")
	}
	for _, want := range []string{"gossip.key", "gossip.insecure", "agent keygen", "gossip.bind=0.0.0.0:17946", "transport.listen=/ip4/0.0.0.0/tcp/17947"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %q; does not say %q", err, want)
		}
	}
	if w := c.InsecureWarning(); !strings.Contains(w, "gossip.bind=0.0.0.0:17946") || !strings.Contains(w, "gossip.key") {
		t.Errorf("InsecureWarning = %q; want the exposed bind and the key named", w)
	}
	c.Gossip.Insecure = true
	if err := c.Validate(); err != nil {
		t.Errorf("gossip.insecure = true: Validate = %v, want nil", err)
	}
	c.Gossip.Bind, c.Transport.Listen = "127.0.0.1:17946", "/ip4/127.0.0.1/tcp/17947"
	if w := c.InsecureWarning(); w != "" {
		t.Errorf("loopback only: InsecureWarning = %q, want none", w)
	}
}

func TestExampleFile(t *testing.T) {
	const path = "../config.example.toml"
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	if c.Node.Name != "n1" || c.Node.ID != 1 || c.Node.DataDir != "data/n1" || c.API.Socket != "data/n1/agent.sock" {
		t.Errorf("example node/socket = %+v %q", c.Node, c.API.Socket)
	}
	if c.Election.Protocol != ProtocolMajority || !slices.Equal(c.Election.Voters, []string{"n1"}) {
		t.Errorf("example election = %+v; want a single-voter majority that elects n1", c.Election)
	}
	// Every key is documented in the example: it sets each one, and its
	// values equal the defaults (except the keys without defaults).
	// api.socket is shown commented out: left unset it derives from
	// node.data_dir, so -node.data_dir alone gives a second node its own.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range allKeys(reflect.TypeFor[Config](), "") {
		leaf := key[strings.LastIndex(key, ".")+1:]
		set := "\n" + leaf + " = "
		switch key {
		case "api.socket":
			set = "\n# " + leaf + " = "
		case "elections":
			set = "\n# [elections."
		}
		if !strings.Contains(string(raw), set) {
			t.Errorf("config.example.toml does not set %s", key)
		}
	}
	want := Default()
	want.Node, want.Election.Voters, want.API.Socket, want.Gossip.Join = c.Node, c.Election.Voters, c.API.Socket, c.Gossip.Join
	if !reflect.DeepEqual(c, want) {
		t.Errorf("example values differ from Default():\n%+v\n%+v", c, want)
	}
}

func TestDurationAndModeText(t *testing.T) {
	for _, bad := range []string{`heartbeat_interval = 100`, `heartbeat_interval = "100"`, `heartbeat_interval = "fast"`} {
		c := Default()
		err := c.Decode("x.toml", strings.NewReader("[detector]\n"+bad))
		if err == nil || !strings.Contains(err.Error(), "heartbeat_interval") {
			t.Errorf("%s: err = %v, want an error naming the key", bad, err)
		}
	}
	for in, want := range map[string]FileMode{`"0660"`: 0o660, `"600"`: 0o600, `"0o640"`: 0o640} {
		c := Default()
		if err := c.Decode("x.toml", strings.NewReader("[api]\nsocket_mode = "+in)); err != nil || c.API.SocketMode != want {
			t.Errorf("socket_mode = %s: got %v, %v; want %v", in, c.API.SocketMode, err, want)
		}
	}
	for _, bad := range []string{`0o660`, `660`, `"0999"`, `"01777"`, `""`} {
		c := Default()
		if err := c.Decode("x.toml", strings.NewReader("[api]\nsocket_mode = "+bad)); err == nil {
			t.Errorf("socket_mode = %s: accepted as %v, want error", bad, c.API.SocketMode)
		}
	}
}

func TestDecodeFailureLeavesConfigUnchanged(t *testing.T) {
	c := Default()
	c.Election.Voters = []string{"keep"}
	err := c.Decode("x.toml", strings.NewReader("[election]\nvoters = [\"a\", \"b\"]\n[api]\nsocket_mode = 5\n"))
	if err == nil {
		t.Fatal("want error")
	}
	if !slices.Equal(c.Election.Voters, []string{"keep"}) {
		t.Errorf("voters = %q after a failed decode", c.Election.Voters)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", MaxFileBytes))
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: %v", err)
	}
	p := writeFile(t, "[node]\nname = \"n1\"\nid = -3\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "node.id: -3 is negative") {
		t.Errorf("negative id: %v, want an error naming the file and the key", err)
	}
}

// FuzzDecode checks that no input makes the decoder or Validate panic.
func FuzzDecode(f *testing.F) {
	example, err := os.ReadFile("../config.example.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add(minimal)
	f.Add("[node\nname=")
	f.Add("\x00\xff\xfe garbage \"\"\" [[[")
	f.Add("[node]\nid = 99999999999999999999999\n")
	f.Add("[api]\nsocket_mode = { a = 1 }\n[detector]\nthreshold = nan\n")
	f.Add("node = 1\n[election]\nvoters = [1, 2]\n")
	f.Fuzz(func(t *testing.T, in string) {
		c := Default()
		if err := c.Decode("fuzz.toml", strings.NewReader(in)); err != nil {
			if !strings.Contains(err.Error(), "fuzz.toml") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		_ = c.Validate()
	})
}

func TestAPILimitsValidated(t *testing.T) {
	c := Default()
	c.Node.Name, c.Node.ID = "n1", 1
	c.API.MaxConnections, c.API.MaxWatchers = 0, 10
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "api.max_connections") || !strings.Contains(err.Error(), "api.max_watchers") {
		t.Fatalf("Validate = %v, want errors for api.max_connections and api.max_watchers", err)
	}
}

// FuzzLoad runs the whole loader — read, strict decode, derived defaults,
// validation — on arbitrary files. It must never panic; an error names the
// file; an accepted configuration respects the bounds the agent relies on.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("../config.example.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add(minimal)
	f.Add(minimal + "\n[api]\nmax_connections = 0\nmax_watchers = -1\n")
	f.Add(minimal + "\n[api]\nmax_connections = 99999999999\n")
	f.Add(minimal + "\n[api]\nsocket = \"" + strings.Repeat("s", 200) + "\"\n")
	f.Add("[node]\nname = \"n1\"\nid = -3\n")
	f.Fuzz(func(t *testing.T, in string) {
		path := filepath.Join(t.TempDir(), "fuzz.toml")
		if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if c.API.MaxConnections < 1 || c.API.MaxWatchers < 1 || c.API.MaxWatchers > c.API.MaxConnections {
			t.Errorf("accepted api limits %d/%d", c.API.MaxConnections, c.API.MaxWatchers)
		}
		if len(c.API.Socket) == 0 || len(c.API.Socket) > maxSocketPath {
			t.Errorf("accepted socket %q", c.API.Socket)
		}
	})
}

// TestExampleProfilesAreValid reads the timing profiles written out as
// comments at the end of config.example.toml ("# Name: …" then
// "#   [section]  key = value" lines) and checks that each one, applied to
// the example, decodes and validates: a profile an operator copies must
// not be refused at start.
func TestExampleProfilesAreValid(t *testing.T) {
	raw, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	// A profile starts after an empty comment line with "# Name: …"; its
	// settings are "#   [section]  key = value" lines, continued by
	// "#               key = value".
	var (
		name    = regexp.MustCompile(`^# ([A-Z][a-z]+): `)
		opening = regexp.MustCompile(`^#   (\[[a-z]+\])\s+([a-z_]+ = .+)$`)
		more    = regexp.MustCompile(`^#\s{6,}([a-z_]+ = .+)$`)
	)
	_, profiles, found := strings.Cut(string(raw), "\n# Profiles.")
	if !found {
		t.Fatal(`config.example.toml has no "# Profiles." part`)
	}
	tables := map[string]map[string][]string{} // profile → section → lines
	var profile, section, prev string
	for _, line := range strings.Split(profiles, "\n") {
		switch m := []([]string){name.FindStringSubmatch(line), opening.FindStringSubmatch(line), more.FindStringSubmatch(line)}; {
		case m[0] != nil && prev == "#":
			profile, section = m[0][1], ""
			tables[profile] = map[string][]string{}
		case m[1] != nil && profile != "":
			section = m[1][1]
			tables[profile][section] = append(tables[profile][section], m[1][2])
		case m[2] != nil && section != "":
			tables[profile][section] = append(tables[profile][section], m[2][1])
		}
		prev = line
	}
	for _, want := range []string{"Fast", "Slow", "Frugal"} {
		if len(tables[want]) == 0 {
			t.Errorf("profile %q not found in config.example.toml", want)
		}
	}
	for name, sections := range tables {
		var toml strings.Builder
		for section, lines := range sections {
			toml.WriteString(section + "\n" + strings.Join(lines, "\n") + "\n")
		}
		base, err := Load("../config.example.toml")
		if err != nil {
			t.Fatal(err)
		}
		c := base
		if err := c.Decode(name, strings.NewReader(toml.String())); err != nil {
			t.Errorf("profile %s does not decode: %v\n%s", name, err, toml.String())
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("profile %s is refused: %v\n%s", name, err, toml.String())
		}
		if reflect.DeepEqual(c, base) {
			t.Errorf("profile %s changes nothing", name)
		}
	}
}

// TestBadFlagValueBlamesTheFlag: a value a flag gave is reported against
// the flag, not against the file (which may set the key to something
// valid, on some line), and a list flag says it is comma-separated.
func TestBadFlagValueBlamesTheFlag(t *testing.T) {
	p := writeFile(t, minimal+"protocol = \"majority\"\n")
	badLog := writeFile(t, minimal+"[log]\nformat = \"yaml\"\n")
	for _, tt := range []struct {
		file    string
		args    []string
		want    []string
		notWant []string
	}{
		{p, []string{"-election.protocol=raft"},
			[]string{`invalid flag -election.protocol=raft: "raft" is not one of`},
			[]string{p, "line", "[0]"}},
		{p, []string{"-election.voters=n1 n2 n3"},
			[]string{`invalid flag -election.voters="n1 n2 n3"`, "comma-separated", "-election.voters=n1,n2,n3"},
			[]string{p, "voters[0]"}},
		{p, []string{"-election.voters=n1,n1"},
			[]string{`flag -election.voters=n1,n1: "n1" is listed twice`, "comma-separated"},
			[]string{p, "voters[1]"}},
		// A problem of the file's stays the file's, next to the flag's.
		{badLog, []string{"-election.protocol=raft", "-node.name=n1"},
			[]string{"flag -election.protocol=raft", badLog + ": 2 invalid settings", "log.format (line"},
			nil},
	} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fl := RegisterFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		_, err := fl.Load(tt.file)
		if err == nil {
			t.Errorf("%q: no error", tt.args)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error does not say %q:\n%v", tt.args, w, err)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%q: error says %q, which is not to blame:\n%v", tt.args, w, err)
			}
		}
	}
}

// TestListKeyHintWithoutIndex: a list key the file does not set is
// pointed at as a list, not as an item ("voters[0] = …" exists nowhere).
func TestListKeyHintWithoutIndex(t *testing.T) {
	c := Default()
	c.Election.Voters = []string{"a b"}
	err := c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate: %v", err)
	}
	locate(ve, "f.toml", "[node]\nname = \"n1\"\n", nil)
	got := ve.Error()
	if strings.Contains(got, "voters[0] =") || strings.Contains(got, "-election.voters[0]") || !strings.Contains(got, "comma-separated") {
		t.Errorf("hint for an unset list key: %s", got)
	}
}
