package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/api"
)

func TestMembers(t *testing.T) {
	tc, sock := startSingle(t)
	bind := tc.cfgs[0].Gossip.Bind

	code, stdout, stderr := cli(t, "members", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent members: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("agent members: want a header and one member, got\n%s", stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "ID", "ADDRESS", "STATE", "PHI"}) {
		t.Errorf("agent members header %q", lines[0])
	}
	if got := strings.Fields(lines[1]); !slices.Equal(got, []string{"n1", "1", bind, "alive", "0.00"}) {
		t.Errorf("agent members row %q, want n1 1 %s alive 0.00", lines[1], bind)
	}

	code, stdout, stderr = cli(t, "members", "-json", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent members -json: exit %d, stderr %q", code, stderr)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("agent members -json: %v, %d members\n%s", err, len(raw), stdout)
	}
	if got, want := jsonKeys(t, string(raw[0])), []string{"addr", "id", "name", "phi", "state"}; !slices.Equal(got, want) {
		t.Errorf("agent members -json keys %q, want %q", got, want)
	}
	var ms []api.Member
	if err := json.Unmarshal([]byte(stdout), &ms); err != nil {
		t.Fatal(err)
	}
	if want := (api.Member{Name: "n1", ID: 1, Addr: bind, State: api.StateAlive}); ms[0] != want {
		t.Errorf("agent members -json: %+v, want %+v", ms[0], want)
	}
}
