package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFlagTypoIsShort: a mistyped flag prints the error, a guess and a
// pointer to -h — not the whole list of flags (agent run has one per key).
func TestFlagTypoIsShort(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-config", "x.toml", "-node.nmae=n2"}, "did you mean -node.name?"},
		{[]string{"status", "-sockt", "x"}, "did you mean -socket?"},
		{[]string{"dev", "-protcol", "bully"}, "did you mean -protocol?"},
	} {
		code, stdout, stderr := cli(t, tt.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || stdout != "" || len(lines) > 3 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "-h' to list its flags") {
			t.Errorf("agent %q: exit %d, stdout %q, %d lines on stderr:\n%s\nwant exit 2, at most 3 lines with %q and a pointer to -h", tt.args, code, stdout, len(lines), stderr, tt.want)
		}
	}
	// -h still lists everything.
	if code, stdout, _ := cli(t, "run", "-h"); code != 0 || !strings.Contains(stdout, "-election.voters") {
		t.Errorf("agent run -h: exit %d, stdout %q", code, stdout)
	}
}

// TestRunWithoutConfig: the message names the missing -config, not only
// the settings it would have given.
func TestRunWithoutConfig(t *testing.T) {
	code, _, stderr := cli(t, "run")
	if code != 2 || !strings.Contains(stderr, "-config FILE is missing") || !strings.Contains(stderr, "agent run -config config.example.toml") {
		t.Errorf("agent run: exit %d, stderr %q; want 2 and -config named as missing", code, stderr)
	}
	code, _, stderr = cli(t, "run", "config.example.toml")
	if code != 2 || !strings.Contains(stderr, "pass the file with -config") {
		t.Errorf("agent run config.example.toml: exit %d, stderr %q", code, stderr)
	}
}

// TestRunUnquotedMode: the TOML decoder's "leading zeroes" becomes the
// line to write.
func TestRunUnquotedMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte("[node]\nname = \"n1\"\n[api]\nsocket_mode = 0660\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "run", "-config", p)
	if want := `line 4: api.socket_mode = 0660`; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, `write: socket_mode = "0660"`) {
		t.Errorf("agent run: exit %d, stderr %q; want 2, %q and the quoted line", code, stderr, want)
	}
}

// TestResignNoOneToHandOver: a lone leader refuses, saying why (not "agent
// unavailable", not "resign: resign:").
func TestResignNoOneToHandOver(t *testing.T) {
	_, sock := startSingle(t)
	code, _, stderr := cli(t, "resign", "-socket", sock)
	if code != 1 || !strings.Contains(stderr, "no other voter is reachable to hand leadership to") || !strings.Contains(stderr, "503") ||
		strings.Contains(stderr, "unavailable:") || strings.Count(stderr, "resign") != 1 {
		t.Errorf("agent resign on a lone leader: exit %d, stderr %q", code, stderr)
	}
}

// TestSocketErrorsSayWhatToDo: each way of failing to reach the agent is
// explained with the next step.
func TestSocketErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o660); err != nil { // not the umask's
		t.Fatal(err)
	}
	denied := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}
	if got := explain("status", sock, fmt.Errorf("agent /v1/status: %w", denied)); !strings.Contains(got, "permission denied") ||
		!strings.Contains(got, "run as ") || !strings.Contains(got, "member of group") || !strings.Contains(got, "mode 0660") {
		t.Errorf("permission denied: %q", got)
	}
	gone := filepath.Join(dir, "nobody.sock")
	code, _, stderr := cli(t, "status", "-socket", gone)
	if code != 1 || !strings.Contains(stderr, "no agent socket at "+gone) || !strings.Contains(stderr, "agent run -config FILE") {
		t.Errorf("missing socket: exit %d, stderr %q", code, stderr)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the file stays, nobody listens: a crashed agent's socket
	code, _, stderr = cli(t, "status", "-socket", filepath.Join(dir, "s.sock"))
	if code != 1 || !strings.Contains(stderr, "nothing answers on the socket") {
		t.Errorf("stale socket: exit %d, stderr %q", code, stderr)
	}
	// A directory or a plain file can never answer: say what it is, not
	// that an agent stopped.
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{dir: dir + " is a directory, not a socket", plain: plain + " is a file but not a socket"} {
		code, _, stderr = cli(t, "status", "-socket", path)
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "stopped") {
			t.Errorf("-socket %s: exit %d, stderr %q; want %q", path, code, stderr, want)
		}
	}
}
