package localapi

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/internal/safefile"
)

// A 103-byte socket path passes the configuration's check; the agent used
// to bind a longer temporary path first and fail.
func TestListenLongestValidPath(t *testing.T) {
	// A long directory and a short name: the temporary path inside it
	// used to be 14 bytes longer than the directory, beyond the kernel's
	// 107.
	base := shortTempDir(t)
	dir := filepath.Join(base, strings.Repeat("d", 103-len(base)-len("/a.sock")-1))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "a.sock")
	if len(p) != 103 {
		t.Fatalf("test path is %d bytes", len(p))
	}
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatalf("Listen on a 103-byte path: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatalf("dial the 103-byte socket: %v", err)
	}
	c.Close()
}

// An unwritable socket directory is reported with the socket's path, not
// the temporary directory's, which told the operator nothing.
func TestListenUnwritableDirNamesTheSocket(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if os.Getuid() == 0 {
		// Root may write anywhere a permission allows; sysfs refuses
		// everyone.
		dir = "/sys"
	}
	p := filepath.Join(dir, "agent.sock")
	_, err := Listen(p, 0o600)
	if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "/.s") {
		t.Fatalf("Listen in an unwritable directory: %v; want an error naming %s and no temporary path", err, p)
	}
}

// A socket directory other users may write to (and not sticky) is refused:
// they could swap the socket for theirs.
func TestListenRefusesDirectoryWritableByOthers(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "agent.sock")
	_, err := Listen(p, 0o600)
	if !errors.Is(err, safefile.ErrUnsafeDir) || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("Listen in a 0777 directory: %v, want a refusal naming the fix", err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatalf("Listen in a sticky directory (like /tmp): %v", err)
	}
	ln.Close()
}
