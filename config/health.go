package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// MaxMetaBytes bounds node.meta as published: its JSON encoding. The map
// travels in gossip metadata, which memberlist caps at 512 bytes for
// everything a node publishes; the peer id and address (up to ~170 bytes)
// and the settings digest (membership.MaxDigestLen, 100) share the rest.
const MaxMetaBytes = 200

// MaxChecks and MaxHooks bound the [[check]] and [[hook]] tables.
const (
	MaxChecks = 16
	MaxHooks  = 16
)

// Hook transitions for Hook.On.
const (
	HookLeader   = "leader"
	HookFollower = "follower"
	HookNoLeader = "no_leader"
)

// Check is one [[check]] table: a health check whose failure makes the
// agent ineligible for leadership (docs/health.md).
type Check struct {
	// Name identifies the check in status and metrics.
	Name string `toml:"name"`
	// Command is run without a shell; exit status 0 is passing.
	Command []string `toml:"command"`
	// HTTP is a URL fetched with GET; a 2xx answer is passing. Exactly one
	// of Command and HTTP is set.
	HTTP string `toml:"http"`
	// Interval is the time between the starts of two runs. Default 1s.
	Interval Duration `toml:"interval"`
	// Timeout bounds one run; a run that takes longer fails. Default
	// Interval/2, at most Interval.
	Timeout Duration `toml:"timeout"`
	// Fall is how many consecutive failures make a passing check fail;
	// Rise how many consecutive passes make a failing check pass. Default
	// 1 each.
	Fall int `toml:"fall"`
	Rise int `toml:"rise"`
	// Election limits the check to one election: its failure makes the
	// agent ineligible there only. "" (the default) gates every election.
	Election string `toml:"election"`
}

// Hook is one [[hook]] table: a command run when this agent's view of
// leadership changes.
type Hook struct {
	// On is "leader" (this node became leader), "follower" (another node
	// leads) or "no_leader".
	On string `toml:"on"`
	// Command is run without a shell, with CONCLAVE_EPOCH,
	// CONCLAVE_LEADER, CONCLAVE_ROLE and CONCLAVE_ELECTION in its
	// environment.
	Command []string `toml:"command"`
	// Timeout kills the command when it runs longer. Default 10s.
	Timeout Duration `toml:"timeout"`
	// Election is the election whose transitions run the hook; "" (the
	// default) is the default election. CONCLAVE_ELECTION names it.
	Election string `toml:"election"`
}

// withHealthDefaults fills the zero fields of the checks and hooks.
func (c *Config) withHealthDefaults() {
	for i := range c.Checks {
		k := &c.Checks[i]
		if k.Interval == 0 {
			k.Interval = Duration(time.Second)
		}
		if k.Timeout == 0 {
			k.Timeout = k.Interval / 2
		}
		if k.Fall == 0 {
			k.Fall = 1
		}
		if k.Rise == 0 {
			k.Rise = 1
		}
	}
	for i := range c.Hooks {
		if c.Hooks[i].Timeout == 0 {
			c.Hooks[i].Timeout = Duration(10 * time.Second)
		}
	}
}

func (c *Config) validateHealth(ch *checker) {
	c.withHealthDefaults()
	if c.Node.Priority < 0 || c.Node.Priority > 255 {
		ch.add("node.priority", "%d is out of range: must be 0 … 255", c.Node.Priority)
	}
	for k, v := range c.Node.Meta {
		if p := nameProblem(k); p != "" {
			ch.add("node.meta", "key %s", p)
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				ch.add("node.meta", "value of %q holds a control character", k)
				break
			}
		}
	}
	if enc, err := json.Marshal(c.Node.Meta); err == nil && len(c.Node.Meta) > 0 && len(enc) > MaxMetaBytes {
		ch.add("node.meta", "%d bytes as published (JSON), at most %d (it travels in gossip metadata)", len(enc), MaxMetaBytes)
	}
	if c.Election.PreemptDelay < 0 {
		ch.add("election.preempt_delay", "%s must not be negative", c.Election.PreemptDelay)
	}
	if len(c.Checks) > MaxChecks {
		ch.add("check", "%d checks, at most %d", len(c.Checks), MaxChecks)
	}
	runs := func(key, name string) {
		if _, ok := c.ElectionFor(name); name != "" && !ok {
			ch.add(key, "%q is not an election of this agent (%s); name one of them, or leave it out", name, strings.Join(c.ElectionNames(), ", "))
		}
	}
	for i, h := range c.Hooks {
		runs(fmt.Sprintf("hook[%d].election", i), h.Election)
	}
	names := make(map[string]bool, len(c.Checks))
	for i, k := range c.Checks {
		key := fmt.Sprintf("check[%d]", i)
		runs(key+".election", k.Election)
		if p := nameProblem(k.Name); p != "" {
			ch.add(key+".name", "%s", p)
		} else if names[k.Name] {
			ch.add(key+".name", "%q is used by two checks", k.Name)
		}
		names[k.Name] = true
		switch {
		case len(k.Command) > 0 && k.HTTP != "":
			ch.add(key, "set command or http, not both")
		case len(k.Command) == 0 && k.HTTP == "":
			ch.add(key, "set command (exit 0 = passing) or http (2xx = passing)")
		case len(k.Command) > 0 && k.Command[0] == "":
			ch.add(key+".command", "the program must not be empty")
		case k.HTTP != "":
			if u, err := url.Parse(k.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ch.add(key+".http", "%q is not an http:// or https:// URL", k.HTTP)
			}
		}
		positive(ch, key+".interval", k.Interval)
		positive(ch, key+".timeout", k.Timeout)
		if k.Timeout > k.Interval {
			ch.add(key+".timeout", "%s is longer than the interval %s", k.Timeout, k.Interval)
		}
		if k.Fall < 1 || k.Fall > 100 {
			ch.add(key+".fall", "%d is out of range: must be 1 … 100", k.Fall)
		}
		if k.Rise < 1 || k.Rise > 100 {
			ch.add(key+".rise", "%d is out of range: must be 1 … 100", k.Rise)
		}
	}
	if len(c.Hooks) > MaxHooks {
		ch.add("hook", "%d hooks, at most %d", len(c.Hooks), MaxHooks)
	}
	for i, h := range c.Hooks {
		key := fmt.Sprintf("hook[%d]", i)
		switch h.On {
		case HookLeader, HookFollower, HookNoLeader:
		default:
			ch.add(key+".on", "%q is not one of \"leader\", \"follower\", \"no_leader\"", h.On)
		}
		if len(h.Command) == 0 || h.Command[0] == "" {
			ch.add(key+".command", "must name a program to run")
		}
		positive(ch, key+".timeout", h.Timeout)
	}
}

// parseMeta parses the -node.meta flag: "k=v,k2=v2" ("" is no meta).
func parseMeta(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}
