package localapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/api"
)

const envAccessSocket = "CONCLAVE_TEST_ACCESS_SOCKET"

// accessRequests are what the helper asks, one line each in its output:
// the reads first, then every write.
var accessRequests = []struct{ method, path, body string }{
	{"GET", api.PathStatus, ""},
	{"GET", api.PathMembers, ""},
	{"GET", api.PathVoters, ""},
	{"POST", api.PathResign, ""},
	{"POST", api.PathMaint + "?enable=true&reason=test", ""},
	{"POST", api.PathVoters, `{"add":"n9"}`},
	{"GET", api.PathKeys, ""}, // it shows the keys: writers only
	{"GET", api.PathClusterKeys, ""},
	{"POST", api.PathClusterKeys, `{"op":"install","key":"k"}`},
	// A write under an election's path is a write like the unprefixed one.
	{"POST", api.ElectionPath("db", api.PathResign), ""},
	// Holding a candidacy moves leadership: writers only.
	{"POST", api.PathCampaign, ""},
	{"POST", api.PathHeartbeat + "?session=s", ""}, // routine: a success is not logged
}

// routineWrites is how many of accessRequests' writes leave no audit line
// when they succeed.
const routineWrites = 1

// TestAccessHelper is not a test: TestSocketPermissions runs the test
// binary as other users with this test selected, to be their processes.
// It prints "METHOD PATH=CODE BODY" per request, or "dial: ERROR".
func TestAccessHelper(t *testing.T) {
	sock := os.Getenv(envAccessSocket)
	if sock == "" {
		t.Skip("helper process only")
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	for _, rq := range accessRequests {
		r, err := http.NewRequest(rq.method, "http://agent"+rq.path, strings.NewReader(rq.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(r)
		if err != nil {
			fmt.Printf("%s %s=dial: %v\n", rq.method, rq.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %s=%d %s\n", rq.method, rq.path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
}

// localUser is a real account made for a test.
type localUser struct {
	name     string
	uid, gid uint32
}

// addGroup and addUser create real accounts (groupadd, useradd) and remove
// them when the test ends: the kernel and the group database must name
// the caller, so nothing here is pretended.
func addGroup(t *testing.T, name string) uint32 {
	t.Helper()
	if out, err := exec.Command("groupadd", name).CombinedOutput(); err != nil {
		t.Fatalf("groupadd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("groupdel", name).Run() })
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(gid)
}

func addUser(t *testing.T, name, group string, extra ...string) localUser {
	t.Helper()
	args := []string{"-M", "-N", "-s", "/usr/sbin/nologin", "-g", group}
	if len(extra) > 0 {
		args = append(args, "-G", strings.Join(extra, ","))
	}
	if out, err := exec.Command("useradd", append(args, name)...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return localUser{name: name, uid: uint32(uid), gid: uint32(gid)}
}

// accessBackend answers every endpoint, writes included.
type accessBackend struct {
	*voterFake
	maint *maintBackend
}

func (b accessBackend) Keys(context.Context) (api.Keys, error) {
	return api.Keys{Primary: "k", Installed: []string{"k"}}, nil
}

func (b accessBackend) ChangeKeys(context.Context, api.KeyChange) (api.Keys, error) {
	return api.Keys{}, nil
}

func (b accessBackend) ClusterKeys(context.Context, api.ClusterKeyChange) (api.KeyReport, error) {
	return api.KeyReport{Members: 1, Acked: 1}, nil
}

// Elections makes the server take named elections ("db" among them); the
// fake answers every election alike, which is all permissions need.
func (b accessBackend) Elections(context.Context) ([]api.Election, error) {
	return []api.Election{{Status: api.Status{Election: "db"}}, {Status: api.Status{Election: api.DefaultElection}}}, nil
}

// OpenSession opens a session that ends at once, so that the helper's
// campaign stream ends and its answer can be read whole.
func (b accessBackend) OpenSession(context.Context) (Session, error) {
	return Session{ID: "s", Wait: func(context.Context) string { return api.SessionExpired }}, nil
}

func (b accessBackend) KeepSession(context.Context, string) error  { return nil }
func (b accessBackend) CloseSession(context.Context, string) error { return nil }

func (b accessBackend) SetMaint(ctx context.Context, on bool, reason string) (api.MaintResult, error) {
	return b.maint.SetMaint(ctx, on, reason)
}

// accessServer serves a fresh accessBackend on a socket of mode 0660
// owned by root and group, as an operator would set it up, in a folder
// every user may enter, and returns a function that runs the helper as u.
func accessServer(t *testing.T, writeGroup string, group uint32) (accessBackend, *observer.ObservedLogs, *Server, func(u localUser) string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "localapi.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackend{status: api.Status{Node: "n1", ID: 1, Protocol: "majority", Role: api.RoleLeader, Leader: "n1", Epoch: 1}}
	be := accessBackend{voterFake: &voterFake{fakeBackend: fb}, maint: &maintBackend{fakeBackend: fb}}
	core, logs := observer.New(zap.InfoLevel)
	srv, err := New(Options{Backend: be, Hub: NewHub(4), WriteGroup: writeGroup, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := Listen(sock, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sock, 0, int(group)); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		<-served
	})
	run := func(u localUser) string {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^TestAccessHelper$")
		cmd.Env = append(os.Environ(), envAccessSocket+"="+sock)
		cmd.Dir = dir
		// No supplementary groups in the process: membership of the
		// write group must come from the group database.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as %s (uid %d): %v\n%s", u.name, u.uid, err, out)
		}
		return string(out)
	}
	return be, logs, srv, run
}

// answer returns the line of the helper's output for one request.
func answer(out, method, path string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, method+" "+path+"=") {
			return strings.TrimPrefix(line, method+" "+path+"=")
		}
	}
	return "(no answer)"
}

// TestSocketPermissions runs real clients as real users against a socket
// of mode 0660 owned by a read group: a member of the read group reads
// and is refused every write with an error naming the write group; a
// member of api.write_group writes; a user outside both cannot connect.
// Every write, allowed or not, leaves an audit line naming the caller and
// is counted.
func TestSocketPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates users and groups (useradd, groupadd) and runs clients as them")
	}
	for _, tool := range []string{"useradd", "groupadd", "userdel", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s to create real users: %v", tool, err)
		}
	}
	sfx := strconv.Itoa(os.Getpid() % 100000)
	readGroup, writeGroup, otherGroup := "cvread"+sfx, "cvwrite"+sfx, "cvother"+sfx
	readGID := addGroup(t, readGroup)
	addGroup(t, writeGroup)
	addGroup(t, otherGroup)
	reader := addUser(t, "cvreader"+sfx, readGroup)
	writer := addUser(t, "cvwriter"+sfx, readGroup, writeGroup)
	outsider := addUser(t, "cvoutsider"+sfx, otherGroup)

	be, logs, srv, run := accessServer(t, writeGroup, readGID)
	writes := accessRequests[3:]

	t.Run("read group reads but cannot write", func(t *testing.T) {
		out := run(reader)
		for _, rq := range accessRequests[:3] {
			if got := answer(out, rq.method, rq.path); !strings.HasPrefix(got, "200 ") {
				t.Errorf("%s %s as %s: %s, want 200", rq.method, rq.path, reader.name, got)
			}
		}
		for _, rq := range writes {
			got := answer(out, rq.method, rq.path)
			if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, writeGroup) || !strings.Contains(got, "(api.write_group") ||
				!strings.Contains(got, fmt.Sprintf("uid %d", reader.uid)) {
				t.Errorf("%s %s as %s: %s; want 403 naming the caller and group %s", rq.method, rq.path, reader.name, got, writeGroup)
			}
		}
		be.mu.Lock()
		resigns := be.resigns
		be.mu.Unlock()
		if resigns != 0 || be.maint.calls != 0 || len(be.changes) != 0 {
			t.Errorf("refused writes reached the backend: %d resigns, %d maint, %d voter changes", resigns, be.maint.calls, len(be.changes))
		}
		audited(t, logs, reader, OutcomeDenied, len(writes))
	})

	t.Run("write group writes", func(t *testing.T) {
		out := run(writer)
		for _, rq := range writes {
			if got := answer(out, rq.method, rq.path); !strings.HasPrefix(got, "200 ") {
				t.Errorf("%s %s as %s (in %s): %s, want 200", rq.method, rq.path, writer.name, writeGroup, got)
			}
		}
		audited(t, logs, writer, OutcomeOK, len(writes)-routineWrites)
		opened := 0
		for _, e := range logs.FilterMessage("audit: socket write stream opened").All() {
			if f := e.ContextMap(); f["uid"] == writer.uid && f["path"] == api.PathCampaign {
				opened++
			}
		}
		if opened != 1 {
			t.Errorf("%d audit lines for %s's campaign as it opened, want 1", opened, writer.name)
		}
	})

	t.Run("others cannot connect", func(t *testing.T) {
		out := run(outsider)
		for _, rq := range accessRequests {
			if got := answer(out, rq.method, rq.path); !strings.Contains(got, "permission denied") {
				t.Errorf("%s %s as %s (in neither group): %s, want permission denied", rq.method, rq.path, outsider.name, got)
			}
		}
		audited(t, logs, outsider, OutcomeDenied, 0)
	})

	counts := map[string]uint64{}
	for _, c := range srv.WriteCounts() {
		counts[c.Path+" "+c.Outcome] = c.Count
	}
	// The election's write is counted under its endpoint, not its name.
	for _, p := range []string{api.PathResign, api.PathMaint, api.PathVoters, api.PathElections + "/{name}/resign", api.PathCampaign, api.PathHeartbeat} {
		if counts[p+" "+OutcomeDenied] != 1 || counts[p+" "+OutcomeOK] != 1 {
			t.Errorf("write counts for %s: %v; want 1 denied and 1 ok", p, counts)
		}
	}

	t.Run("without a write group only the agent's user writes", func(t *testing.T) {
		_, logs, _, run := accessServer(t, "", readGID)
		out := run(writer)
		got := answer(out, "POST", api.PathResign)
		if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "set api.write_group") {
			t.Errorf("resign as %s with no write group: %s; want 403 saying to set api.write_group", writer.name, got)
		}
		audited(t, logs, writer, OutcomeDenied, len(writes))
	})
}

// audited checks that u's writes left n audit lines with its uid and gid,
// a pid, the path and the outcome.
func audited(t *testing.T, logs *observer.ObservedLogs, u localUser, outcome string, n int) {
	t.Helper()
	got := 0
	for _, e := range logs.FilterMessage("audit: socket write").All() {
		f := e.ContextMap()
		if f["uid"] != u.uid {
			continue
		}
		if f["gid"] != u.gid || f["outcome"] != outcome || f["pid"] == nil || f["pid"] == int32(0) || f["path"] == "" {
			t.Errorf("audit line for %s: %v; want gid %d, outcome %s, a pid and the path", u.name, f, u.gid, outcome)
		}
		got++
	}
	if got != n {
		t.Errorf("%d audit lines for %s's writes, want %d", got, u.name, n)
	}
}
