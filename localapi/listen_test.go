package localapi

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestListenModeIgnoresUmask(t *testing.T) {
	// The umask is process-wide; no test in this package runs in parallel.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, mode := range []fs.FileMode{0o600, 0o660, 0o666} {
		p := filepath.Join(shortTempDir(t), "sub", "agent.sock")
		ln, err := Listen(p, mode)
		if err != nil {
			t.Fatalf("Listen(%v): %v", mode, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != mode {
			t.Errorf("socket mode %v, want socket %v", fi.Mode(), mode)
		}
		entries, _ := os.ReadDir(filepath.Dir(p))
		if len(entries) != 1 {
			t.Errorf("directory holds %d entries, want only the socket (temp dir left over?)", len(entries))
		}
		ln.Close()
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket file left after Close: %v", err)
		}
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	p := filepath.Join(shortTempDir(t), "agent.sock")
	// A crashed agent: the socket file stays, nobody listens.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	ln2, err := Listen(p, 0o600)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln2.Close()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatalf("dial new socket: %v", err)
	}
	c.Close()
}

func TestListenRefusesLiveSocket(t *testing.T) {
	p := filepath.Join(shortTempDir(t), "agent.sock")
	live, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := Listen(p, 0o600); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second Listen: %v, want ErrSocketInUse", err)
	}
	// The live agent's socket still works.
	accepted := make(chan error, 1)
	go func() {
		c, err := live.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatalf("live socket gone: %v", err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

func TestListenNeverRemovesOtherFiles(t *testing.T) {
	p := filepath.Join(shortTempDir(t), "agent.sock")
	if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(p, 0o600); err == nil {
		t.Fatal("Listen over a regular file succeeded")
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "precious" {
		t.Errorf("regular file damaged: %q %v", b, err)
	}
	if _, err := Listen(filepath.Join(shortTempDir(t), "x.sock"), 0o1777); err == nil {
		t.Error("mode with non-permission bits accepted")
	}
}

func TestCloseLeavesReplacementSocket(t *testing.T) {
	p := filepath.Join(shortTempDir(t), "agent.sock")
	old, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// Someone replaced the file (an operator, or a new agent after a
	// stuck one); closing the old listener must not delete the new socket.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	repl, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close()
	old.Close()
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("closing the old listener removed the new socket: %v", err)
	}
}

// An agent may stop before its Serve goroutine runs: Serve must then return
// at once instead of serving forever.
func TestServeAfterShutdownReturns(t *testing.T) {
	s, err := New(Options{Backend: &fakeBackend{}, Hub: NewHub(4)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(t.TempDir(), "s.sock"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}
