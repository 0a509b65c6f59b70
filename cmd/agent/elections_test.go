package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/localapi"
)

// TestElectionsOfARealAgent: a real agent runs the default election, and
// the election commands say so; an election it does not run is an error
// that says how to list them, from every command that takes -election.
func TestElectionsOfARealAgent(t *testing.T) {
	_, sock := startSingle(t)
	code, stdout, stderr := cli(t, "elections", "-socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("agent elections: exit %d, %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME ") || !strings.HasPrefix(lines[1], "default ") ||
		!strings.Contains(lines[1], " majority ") || !strings.Contains(lines[1], " leader ") || !strings.Contains(lines[1], " n1 ") {
		t.Errorf("agent elections:\n%s\nwant a header and the default election, led by n1", stdout)
	}
	code, stdout, stderr = cli(t, "elections", "-json", "-socket", sock)
	var list []api.Election
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) != 1 {
		t.Fatalf("agent elections -json: exit %d, %v, %s%s", code, err, stdout, stderr)
	}
	if e := list[0]; e.Election != api.DefaultElection || e.Role != api.RoleLeader || e.Leader != "n1" || e.Epoch == 0 || e.Lease() <= 0 {
		t.Errorf("agent elections -json: %+v, want the default election led by n1 with a lease", e)
	}

	if code, stdout, stderr := cli(t, "status", "-election", "default", "-socket", sock); code != 0 || !strings.Contains(stdout, "role      leader\n") {
		t.Errorf("agent status -election default: exit %d, %q, %q", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"status"}, {"leader"}, {"leader", "-wait", "1m"}, {"watch"}, {"resign"}, {"maint", "on"}, {"voters"}, {"voters", "add", "n4"},
	} {
		args = append(args, "-election", "nope", "-socket", sock)
		code, stdout, stderr := cli(t, args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, `no election "nope" on this agent; `+"`agent elections`") || !strings.Contains(stderr, "404") {
			t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want exit 1 naming the election and how to list them", args, code, stdout, stderr)
		}
	}
	// A name that cannot be one is a usage error, before any socket is
	// tried (none is there).
	nowhere := filepath.Join(t.TempDir(), "nobody.sock")
	for _, cmd := range []string{"status", "leader", "watch", "resign", "voters", "exec"} {
		args := []string{cmd, "-election", "Not/A/Name", "-socket", nowhere}
		if cmd == "exec" {
			args = append(args, "--", "true")
		}
		code, stdout, stderr := cli(t, args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "invalid election name") || strings.Contains(stderr, "no agent socket") {
			t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want exit 2 refusing the name", args, code, stdout, stderr)
		}
	}
}

// namedFake runs named elections behind the real localapi server, for the
// commands' handling of an election other than the default until the
// agent runs them: each request acts on the election its context names.
type namedFake struct {
	mu      sync.Mutex
	status  map[string]api.Status
	resigns map[string]int
}

func (f *namedFake) Status(ctx context.Context, _ bool) (api.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.status[localapi.ElectionFrom(ctx)]
	if !ok {
		return api.Status{}, localapi.ErrNoElection
	}
	return st, nil
}

func (f *namedFake) Members(context.Context) ([]api.Member, error) { return nil, nil }
func (f *namedFake) Health(context.Context) error                  { return nil }

func (f *namedFake) Resign(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resigns[localapi.ElectionFrom(ctx)]++
	return nil
}

func (f *namedFake) Elections(context.Context) ([]api.Election, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Election
	for _, st := range f.status {
		out = append(out, api.Election{Status: st})
	}
	return out, nil
}

// startNamedFake serves a namedFake with the default election (n2 leads)
// and "db" (this node, n1, leads with a lease, in maintenance) on a socket.
func startNamedFake(t *testing.T) (*namedFake, *localapi.Hub, string) {
	t.Helper()
	f := &namedFake{resigns: map[string]int{}, status: map[string]api.Status{
		api.DefaultElection: {Election: api.DefaultElection, Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleFollower, Leader: "n2", Epoch: 4},
		"db": {Election: "db", Node: "n1", ID: 1, Protocol: "bully", Role: api.RoleLeader, Leader: "n1", Epoch: 17, LeaseNS: int64(1500 * time.Millisecond),
			Health: &api.HealthReport{Status: api.HealthMaintenance, Maintenance: &api.MaintInfo{Reason: "disk swap"}}},
	}}
	hub := localapi.NewHub(0)
	for name, st := range f.status {
		hub.PublishTo(name, st)
	}
	srv, err := localapi.New(localapi.Options{Backend: f, Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "el")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := localapi.Listen(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		hub.Close()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	return f, hub, sock
}

func TestCommandsActOnANamedElection(t *testing.T) {
	f, hub, sock := startNamedFake(t)
	code, stdout, stderr := cli(t, "elections", "-socket", sock)
	want := "NAME     PROTOCOL  ROLE      LEADER  EPOCH  LEASE  HEALTH\n" +
		"db       bully     leader    n1      17     1.5s   maintenance (disk swap)\n" +
		"default  majority  follower  n2      4      -      -\n"
	if code != 0 || stdout != want {
		t.Errorf("agent elections: exit %d, stderr %q, stdout\n%s\nwant\n%s", code, stderr, stdout, want)
	}
	code, stdout, _ = cli(t, "elections", "-json", "-socket", sock)
	var list []map[string]any
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) != 2 || list[0]["election"] != "db" || list[1]["election"] != "default" {
		t.Errorf("agent elections -json: exit %d, %v: %s", code, err, stdout)
	}

	code, stdout, _ = cli(t, "status", "-election", "db", "-socket", sock)
	if code != 0 || !strings.HasPrefix(stdout, "election  db\n") || !strings.Contains(stdout, "epoch     17\n") {
		t.Errorf("agent status -election db: exit %d:\n%s", code, stdout)
	}
	if code, stdout, _ = cli(t, "status", "-socket", sock); code != 0 || strings.Contains(stdout, "election") || !strings.Contains(stdout, "epoch     4\n") {
		t.Errorf("agent status (the default election): exit %d:\n%s", code, stdout)
	}
	if code, stdout, _ = cli(t, "leader", "-election", "db", "-socket", sock); code != 0 || stdout != "n1 epoch 17 (this node)\n" {
		t.Errorf("agent leader -election db: exit %d, %q", code, stdout)
	}
	code, stdout, _ = cli(t, "resign", "-election", "db", "-socket", sock)
	f.mu.Lock()
	resigns := fmt.Sprint(f.resigns)
	f.mu.Unlock()
	if code != 0 || stdout != "resigned: leadership of election db is being handed over\n" || resigns != "map[db:1]" {
		t.Errorf("agent resign -election db: exit %d, %q; resigns %s, want db's alone", code, stdout, resigns)
	}

	// watch -election db prints db's changes, naming it, and no other's.
	var out, errOut syncBuffer
	stop := background(t, &out, &errOut, "watch", "-election", "db", "-socket", sock)
	eventually(t, 10*time.Second, "the first line of db's watch", func() bool { return strings.Contains(out.String(), "epoch=17 election=db") })
	hub.Publish(api.Status{Election: api.DefaultElection, Role: api.RoleFollower, Leader: "n3", Epoch: 5})
	hub.PublishTo("db", api.Status{Election: "db", Role: api.RoleFollower, Leader: "n2", Epoch: 18})
	eventually(t, 10*time.Second, "db's change", func() bool { return strings.Contains(out.String(), "epoch=18 election=db") })
	stop()
	if s := out.String(); strings.Contains(s, "epoch=5") || strings.Count(s, "\n") != 2 {
		t.Errorf("agent watch -election db printed:\n%s\nwant db's two lines alone", s)
	}
}
