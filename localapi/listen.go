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

	"github.com/conclave-agent/conclave/internal/safefile"
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
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("localapi: socket path %s is %d bytes; the kernel takes at most %d: choose a shorter api.socket", path, len(path), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("localapi: cannot create the directory of socket %s: %w", path, err)
	}
	// Another user who can write to the directory could replace the socket
	// with one of theirs. A sticky directory (like /tmp) is safe from that.
	if err := safefile.CheckDir(dir, true); err != nil {
		return nil, fmt.Errorf("localapi: socket %s: %w", path, err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}

	tmpDir, err := os.MkdirTemp(dir, ".s")
	if err != nil {
		// The temporary name means nothing to the user: name the socket.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("localapi: cannot create socket %s: %w: this user (uid %d) may not create files in %s; run the agent as a user who may, or choose another api.socket", path, err, os.Getuid(), dir)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := bindShort(tmpDir, tmp)
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
		return fail(fmt.Errorf("localapi: chmod socket %s: %w", path, err))
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(fmt.Errorf("localapi: socket %s: %w", path, err))
	}
	// link, unlike rename, never replaces a file that appeared at path
	// after the stale-socket check (another agent's socket, or anything).
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(fmt.Errorf("localapi: %s appeared while this agent was creating its socket; refusing to replace it: %w", path, ErrSocketInUse))
		}
		return fail(fmt.Errorf("localapi: socket %s: %w", path, err))
	}
	return &unixListener{UnixListener: ln, path: path, file: fi}, nil
}

// maxSocketPath is the longest socket path the kernel accepts: Linux's
// sun_path holds 108 bytes including the NUL. (The configuration allows 103,
// the portable bound.)
const maxSocketPath = 107

// oPath is Linux's O_PATH, which the syscall package does not name.
const oPath = 0x200000

// bindShort binds a Unix socket at tmp, inside dir, through
// /proc/self/fd/N/s when it can: that path is short whatever dir is, so the
// temporary name never makes a valid socket path too long to bind.
func bindShort(dir, tmp string) (*net.UnixListener, error) {
	d, err := os.OpenFile(dir, oPath|syscall.O_DIRECTORY, 0)
	if err == nil {
		defer d.Close()
		short := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(tmp))
		if ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: short, Net: "unix"}); err == nil {
			return ln, nil
		}
	}
	// No /proc: bind at the real temporary path, if it fits.
	if len(tmp) > maxSocketPath {
		return nil, fmt.Errorf("the temporary socket path %s is longer than %d bytes and /proc is not available to shorten it", tmp, maxSocketPath)
	}
	return net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
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
