package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conclave.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bad configuration is exit 2 with the key (and file) named, before
// anything starts.
func TestRunBadConfig(t *testing.T) {
	node := "[node]\nname = \"n1\"\nid = 1\ndata_dir = \"" + t.TempDir() + "\"\n"
	for _, tt := range []struct {
		name  string
		args  func(path string) []string
		body  string
		wants []string
	}{
		{"unknown key", nil, node + "[election]\nelecton_timeout = \"1s\"\n", []string{`unknown key "election.electon_timeout"`}},
		{"unknown table", nil, node + "[gosip]\nbind = \"127.0.0.1:1\"\n", []string{`"gosip"`}},
		{"bad value", nil, node + "[election]\nprotocol = \"paxos\"\n", []string{"election.protocol", "paxos"}},
		{"bad duration", nil, node + "[election]\nelection_timeout = \"soon\"\n", []string{"election_timeout"}},
		{"syntax", nil, node + "[election\n", []string{"line"}},
		{"flag makes it bad", func(p string) []string { return []string{"-config", p, "-node.id", "0"} }, node, []string{"node.id"}},
		{"no config", func(string) []string { return nil }, "", []string{"node.name"}},
		{"wildcard without key", nil, node + "[gossip]\nbind = \"0.0.0.0:17946\"\n[transport]\nlisten = \"/ip4/0.0.0.0/tcp/17947\"\n[election]\nvoters = [\"n1\"]\n",
			[]string{"gossip.key", "gossip.insecure", "agent keygen", "gossip.bind=0.0.0.0:17946", "transport.listen=/ip4/0.0.0.0/tcp/17947"}},
		{"flag exposes it", func(p string) []string { return []string{"-config", p, "-gossip.bind=0.0.0.0:17946"} }, node + "[election]\nvoters = [\"n1\"]\n",
			[]string{"gossip.key", "gossip.insecure", "agent keygen"}},
		{"no such file", func(p string) []string { return []string{"-config", p + ".missing"} }, "", []string{"conclave.toml.missing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			args := []string{"-config", path}
			if tt.args != nil {
				args = tt.args(path)
			}
			code, stdout, stderr := cli(t, append([]string{"run"}, args...)...)
			if code != 2 || stdout != "" {
				t.Errorf("agent run: exit %d, stdout %q, stderr %q; want exit 2", code, stdout, stderr)
			}
			if tt.args == nil && !strings.Contains(stderr, path) {
				t.Errorf("agent run: stderr %q does not name the file %s", stderr, path)
			}
			for _, want := range tt.wants {
				if !strings.Contains(stderr, want) {
					t.Errorf("agent run: stderr %q does not say %q", stderr, want)
				}
			}
		})
	}
}

// run with a good file and a flag override serves the socket until
// stopped (SIGTERM for the CLI), then exits 0.
func TestRunServesUntilStopped(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "n1", "agent.sock")
	path := writeConfig(t, fmt.Sprintf(`
[node]
name = "solo"
id = 7
data_dir = %q
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
protocol = "majority"
voters = ["solo"]
election_timeout = "300ms"
[api]
socket = %q
`, filepath.Join(dir, "n1"), testFreePort(t), testFreePort(t), sock))
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "run", "-config", path, "-log.format=json")
	var st api.Status
	eventually(t, 20*time.Second, "the agent to lead", func() bool {
		code, out, _ := cli(t, "status", "-json", "-socket", sock)
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Role == api.RoleLeader
	})
	if st.Node != "solo" || st.ID != 7 || st.Leader != "solo" {
		t.Errorf("agent run from %s: status %+v", path, st)
	}
	if code := stop(); code != 0 {
		t.Errorf("agent run stopped: exit %d, stderr:\n%s", code, stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{`"msg":"agent ready"`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent run -log.format=json: no %s in the log:\n%s", want, logs)
		}
	}
	if stdout.String() != "" {
		t.Errorf("agent run printed on stdout: %q", stdout.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left behind after a clean stop: %v", sock, err)
	}
}
