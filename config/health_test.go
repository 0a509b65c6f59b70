package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

const healthBase = `[node]
name = "n1"
id = 1
data_dir = "d"
priority = 10
meta = { addr = "10.0.0.5:5432" }
[election]
voters = ["n1"]
preempt_delay = "3s"
[api]
socket = "d/agent.sock"
`

func TestChecksAndHooksDecodeWithDefaults(t *testing.T) {
	c := Default()
	err := c.Decode("x.toml", strings.NewReader(healthBase+`
[[check]]
name = "web"
command = ["/bin/true"]
[[check]]
name = "api"
http = "http://127.0.0.1:8080/health"
interval = "2s"
timeout = "500ms"
fall = 3
rise = 2
[[hook]]
on = "leader"
command = ["/bin/echo", "up"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Node.Priority != 10 || c.Node.Meta["addr"] != "10.0.0.5:5432" || c.Election.PreemptDelay.Std() != 3*time.Second {
		t.Errorf("node %+v election %+v", c.Node, c.Election)
	}
	if len(c.Checks) != 2 || len(c.Hooks) != 1 {
		t.Fatalf("checks %+v hooks %+v", c.Checks, c.Hooks)
	}
	web := c.Checks[0]
	if web.Interval.Std() != time.Second || web.Timeout.Std() != 500*time.Millisecond || web.Fall != 1 || web.Rise != 1 {
		t.Errorf("web defaults: %+v", web)
	}
	if api := c.Checks[1]; api.Fall != 3 || api.Rise != 2 || api.Interval.Std() != 2*time.Second {
		t.Errorf("api: %+v", api)
	}
	if c.Hooks[0].Timeout.Std() != 10*time.Second {
		t.Errorf("hook default timeout: %+v", c.Hooks[0])
	}
}

func TestHealthSettingsRefused(t *testing.T) {
	cases := []struct{ toml, key string }{
		{"[node]\npriority = 256\n", "node.priority"},
		{"[node]\npriority = -1\n", "node.priority"},
		{"[node]\nmeta = { addr = \"" + strings.Repeat("x", 300) + "\" }\n", "node.meta"},
		{"[node]\nmeta = { \"bad key\" = \"x\" }\n", "node.meta"},
		{"[node]\nmeta = { a = \"x\\ny\" }\n", "node.meta"},
		{"[election]\npreempt_delay = \"-1s\"\n", "election.preempt_delay"},
		{"[[check]]\nname = \"a\"\n", "check[0]"},
		{"[[check]]\nname = \"a\"\ncommand = [\"x\"]\nhttp = \"http://h/\"\n", "check[0]"},
		{"[[check]]\nname = \"a\"\nhttp = \"ftp://h/\"\n", "check[0].http"},
		{"[[check]]\nname = \"a\"\ncommand = [\"x\"]\ninterval = \"1s\"\ntimeout = \"2s\"\n", "check[0].timeout"},
		{"[[check]]\nname = \"a\"\ncommand = [\"x\"]\nfall = 0\nrise = 101\n", "check[0].rise"},
		{"[[check]]\nname = \"a\"\ncommand = [\"x\"]\n[[check]]\nname = \"a\"\ncommand = [\"y\"]\n", "check[1].name"},
		{"[[hook]]\non = \"master\"\ncommand = [\"x\"]\n", "hook[0].on"},
		{"[[hook]]\non = \"leader\"\n", "hook[0].command"},
	}
	for _, tc := range cases {
		c := Default()
		base := "[node]\nname = \"n1\"\nid = 1\ndata_dir = \"d\"\n[election]\nvoters = [\"n1\"]\n"
		in := base + tc.toml
		if strings.HasPrefix(tc.toml, "[node]") {
			in = strings.Replace(base, "[node]\n", tc.toml, 1)
		} else if strings.HasPrefix(tc.toml, "[election]") {
			in = strings.Replace(base, "[election]\n", tc.toml, 1)
		}
		if err := c.Decode("x.toml", strings.NewReader(in)); err != nil {
			t.Errorf("%q: decode: %v", tc.toml, err)
			continue
		}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: err %v, want one naming %s", tc.toml, err, tc.key)
		}
	}
}

// TestExampleHealthTablesLoad: the commented [[check]] and [[hook]] of
// config.example.toml, uncommented, are valid.
func TestExampleHealthTablesLoad(t *testing.T) {
	raw, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	on := false
	for line := range strings.SplitSeq(string(raw), "\n") {
		if line == "# [[check]]" || line == "# [[hook]]" {
			on = true
		}
		if on && strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "# # ") {
			b.WriteString(strings.TrimPrefix(line, "# ") + "\n")
		} else {
			on = on && strings.HasPrefix(line, "#") && line != "#"
		}
	}
	c := Default()
	if err := c.Decode("example", strings.NewReader(healthBase+b.String())); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(c.Checks) != 1 || len(c.Hooks) != 1 {
		t.Fatalf("example gives %d checks and %d hooks, want 1 each\n%s", len(c.Checks), len(c.Hooks), b.String())
	}
}
