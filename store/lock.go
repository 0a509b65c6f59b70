package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/conclave-agent/conclave/internal/safefile"
)

// LockFileName is the name of the lock file inside the data directory.
const LockFileName = "LOCK"

// ErrLocked is wrapped by the error LockDir returns when another process
// (or another open file description in this one) holds the lock.
var ErrLocked = errors.New("data directory is locked")

// DirLock is an exclusive flock(2) on a data directory's LOCK file. The
// kernel drops it when the process exits, however it exits, so a crash never
// leaves a stale lock behind; the PID in the file is only informative.
type DirLock struct {
	f    *os.File
	path string
}

// LockDir takes the exclusive lock on dir (created with mode 0700 if
// missing) without waiting. If another agent holds it, the error says so and
// names that agent's PID.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	if err := safefile.CheckDir(dir, false); err != nil {
		return nil, fmt.Errorf("store: data directory: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	// Never through a symlink: the PID written below would truncate and
	// overwrite whatever file it points to.
	f, err := safefile.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("store: data directory %s is in use by another agent (pid %s): %w", dir, pid, ErrLocked)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	// The PID lets the next agent's error name the holder; failing to write
	// it does not weaken the lock, but is still reported so that nothing is
	// silently half-done.
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("store: write pid to %s: %w", path, err)
	}
	return &DirLock{f: f, path: path}, nil
}

// Path returns the path of the lock file.
func (l *DirLock) Path() string { return l.path }

// Unlock releases the lock. The file stays: removing it would let a third
// process lock a new file while a second still holds the old one.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	terr := f.Truncate(0)
	uerr := flock(f, syscall.LOCK_UN)
	cerr := f.Close()
	if err := errors.Join(terr, uerr, cerr); err != nil {
		return fmt.Errorf("store: unlock %s: %w", l.path, err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func readPID(f *os.File) string {
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return "unknown"
	}
	return s
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}
