package localapi

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrSocketInUse is returned by Listen when another process answers on the
// socket path: a second agent must not steal a live agent's socket.
var ErrSocketInUse = errors.New("another process is serving on the socket")

// staleDialTimeout bounds the probe of an existing socket file. A live agent
// accepts at once (the kernel completes the connection from the backlog).
const staleDialTimeout = time.Second

// Listen creates the Unix socket at path with permission bits mode and
// listens on it. It creates the socket's directory (0750) if missing.
//
// If a socket file already exists, Listen dials it: if something answers
// it fails with ErrSocketInUse; if nothing does (a crashed agent's stale
// file) it removes the file and goes on. A path that exists and is not a
// socket is never removed.
//
// The socket is bound inside a fresh private (0700) directory, chmod'ed to
// mode and then renamed into place, so it is never reachable with the
// umask's permissions, whatever the umask. Closing the listener removes the
// socket file, unless another agent has replaced it meanwhile.
//
// Two agents must not share a socket path; the data-directory lock does not
// protect a socket outside the data directory.
func Listen(path string, mode fs.FileMode) (net.Listener, error) {
	if mode&^fs.ModePerm != 0 {
		return nil, fmt.Errorf("localapi: socket mode %v has bits beyond 0777", mode)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("localapi: socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}

	tmpDir, err := os.MkdirTemp(dir, ".s") // short: sun_path is ~104 bytes
	if err != nil {
		return nil, fmt.Errorf("localapi: socket: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("localapi: listen on %s: %w", path, err)
	}
	// The file moves; removal on Close is ours to do, by identity.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		return nil, err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(fmt.Errorf("localapi: chmod socket: %w", err))
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(fmt.Errorf("localapi: socket: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("localapi: socket: %w", err))
	}
	return &unixListener{UnixListener: ln, path: path, file: fi}, nil
}

// removeStale removes path if it is a socket nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("localapi: socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("localapi: %s exists and is not a socket; refusing to replace it", path)
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("localapi: %s: %w", path, ErrSocketInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		// Permission denied, a timeout (a live but stuck agent): not
		// provably stale, so leave it.
		return fmt.Errorf("localapi: probing existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localapi: removing stale socket %s: %w", path, err)
	}
	return nil
}

// unixListener removes its socket file on Close if the file at path is
// still the one it created.
type unixListener struct {
	*net.UnixListener
	path string
	file fs.FileInfo
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, e := os.Lstat(l.path); e == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return err
}
