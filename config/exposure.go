package config

import (
	"fmt"
	"net"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
)

// Exposed returns the listening settings that reach beyond loopback, as
// "key=value" ("gossip.bind=0.0.0.0:7946"), in a fixed order. A wildcard
// (0.0.0.0, ::) and a host name other than localhost count as exposed:
// either can be reached from the network, and a name could resolve to
// anything. An address that does not parse is left out: Validate reports
// it on its own key. Empty when the agent listens on loopback only.
func (c *Config) Exposed() []string {
	var out []string
	if !loopbackHostPort(c.Gossip.Bind) {
		out = append(out, "gossip.bind="+c.Gossip.Bind)
	}
	if !loopbackMultiaddr(c.Transport.Listen) {
		out = append(out, "transport.listen="+c.Transport.Listen)
	}
	return out
}

// ExposedWithoutKey reports whether the agent would listen beyond loopback
// with no cluster key: allowed only with gossip.insecure, and then warned
// about while it runs.
func (c *Config) ExposedWithoutKey() bool {
	return c.Gossip.Key == "" && len(c.Exposed()) > 0
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHostPort and loopbackMultiaddr report whether addr names only
// loopback; an unparsable address counts, as it is reported elsewhere.
func loopbackHostPort(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err != nil || loopbackHost(host)
}

func loopbackMultiaddr(addr string) bool {
	m, err := ma.NewMultiaddr(addr)
	if err != nil || len(m) == 0 {
		return true
	}
	switch m[0].Code() {
	case ma.P_IP4, ma.P_IP6, ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
		return loopbackHost(m[0].Value())
	}
	return false
}

// validateExposure refuses an agent that listens beyond loopback without a
// cluster key, unless gossip.insecure says so: without the key, anyone who
// reaches the ports joins gossip in the clear, can claim a voter's name
// while it is down, and can send election messages (docs/security.md).
func (c *Config) validateExposure(ch *checker) {
	if c.Gossip.Insecure || !c.ExposedWithoutKey() {
		return
	}
	ch.add("gossip.key", "is empty while %s beyond loopback: anyone who can reach the ports could join the cluster and send election messages. "+
		"Generate a key with \"agent keygen\" and set gossip.key to it on every node, "+
		"or set gossip.insecure = true (-gossip.insecure) to run without one anyway (docs/security.md)",
		listening(c.Exposed()))
}

// listening says what listens: "gossip.bind=… listens", or two of them
// and "listen".
func listening(exposed []string) string {
	if len(exposed) == 1 {
		return exposed[0] + " listens"
	}
	return strings.Join(exposed, " and ") + " listen"
}

// InsecureWarning is the warning an agent that runs exposed without a key
// (gossip.insecure) logs at start and every minute after, or "" when it
// has a key or listens on loopback only.
func (c *Config) InsecureWarning() string {
	if !c.ExposedWithoutKey() {
		return ""
	}
	return fmt.Sprintf("no cluster key while %s beyond loopback (gossip.insecure = true): "+
		"anyone who can reach these ports can join, claim a member's name and send election messages; "+
		"set gossip.key (\"agent keygen\") on every node", listening(c.Exposed()))
}
