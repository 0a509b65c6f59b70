package config

import (
	"strings"
	"testing"
)

// TestErrorsSayWhatToDo checks that each mistake a person makes in the
// file is reported with the file, the line, the key and the line to write.
func TestErrorsSayWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unquoted mode", "[api]\nsocket_mode = 0660\n", []string{", line 2:", "api.socket_mode", `write: socket_mode = "0660"`}},
		{"decimal mode", "[api]\nsocket_mode = 660\n", []string{", line 2:", `write: socket_mode = "0660"`}},
		{"unquoted duration", "[detector]\nheartbeat_interval = 50ms\n", []string{", line 2:", "detector.heartbeat_interval", `write: heartbeat_interval = "50ms"`}},
		{"duration without unit", "[detector]\nheartbeat_interval = 50\n", []string{", line 2:", "with its unit", `heartbeat_interval = "150ms"`}},
		{"unquoted name", "# c\n[node]\nname = n1\n", []string{", line 3:", `write: name = "n1"`}},
		{"unquoted list", "[election]\nvoters = [n1, n2]\n", []string{", line 2:", `write: voters = ["n1", "n2"]`}},
		{"quoted number", "[node]\nid = \"1\"\n", []string{", line 2:", "write: id = 1"}},
		{"quoted bool", "[election]\nprevote = \"True\"\n", []string{", line 2:", "write: prevote = true"}},
		{"typo", "[election]\nelecton_timeout = \"1s\"\n", []string{`unknown key "election.electon_timeout"`, `did you mean "election.election_timeout"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := c.Decode("x.toml", strings.NewReader(tc.file))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestValidationNamesLineOrPlace checks that a bad value is reported with
// the line that set it, and a missing one with where to set it.
func TestValidationNamesLineOrPlace(t *testing.T) {
	p := writeFile(t, "[node]\nname = \"a b\"\ndata_dir = \"d\"\n[election]\nvoters = [\"a\"]\n")
	_, err := Load(p)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{p, `node.name (line 2): "a b" may contain only`, "node.id: 0 is out of range", "does not set it: add id = … under [node], or pass -node.id=…"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

// TestExampleSocketFollowsDataDir checks that a second node needs only
// -node.data_dir for its own socket: the example leaves api.socket unset.
func TestExampleSocketFollowsDataDir(t *testing.T) {
	c, err := Load("../config.example.toml", func(c *Config) { c.Node.Name, c.Node.ID, c.Node.DataDir = "n2", 2, "data/n2" })
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Socket != "data/n2/agent.sock" {
		t.Errorf("socket = %q, want data/n2/agent.sock", c.API.Socket)
	}
}
