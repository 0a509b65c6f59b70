// Package safefile opens the agent's own files without trusting what it
// finds in their directories: no symlink is followed for the last path
// element (a LOCK, state record or key that is a symlink could make the
// agent truncate, overwrite or reveal another file), and a directory that
// other users may write to is refused, since they could swap files in it.
// The data directory's users — the store, the identity key, the member
// snapshot — and the socket directory share it.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrSymlink is wrapped by the errors of Open and OpenFile when the path
// is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link; refusing to follow it")

// ErrUnsafeDir is wrapped by the error of CheckDir for a directory other
// users may write to.
var ErrUnsafeDir = errors.New("is writable by other users")

// OpenFile is os.OpenFile with O_NOFOLLOW: a symbolic link as the last
// element of path is an error wrapping ErrSymlink, and so is anything but
// a regular file.
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s %w", path, ErrSymlink)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v); refusing to use it", path, fi.Mode().Type())
	}
	// O_NONBLOCK only kept a FIFO planted at path from blocking the open.
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func clearNonblock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// Open opens path for reading, as OpenFile.
func Open(path string) (*os.File, error) { return OpenFile(path, os.O_RDONLY, 0) }

// ReadFile reads a small file through Open.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d expected", path, fi.Size(), max)
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, err
	}
	return b[:n], nil
}

// CheckDir refuses a directory that users other than its owner may write
// to (group or other write permission). With allowSticky, a sticky
// directory such as /tmp passes: there others may add files but not
// remove or rename ours. The error names the path and the fix.
func CheckDir(path string, allowSticky bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 == 0 || (allowSticky && mode&fs.ModeSticky != 0) {
		return nil
	}
	return fmt.Errorf("%s %w (mode %v): another user could replace the agent's files there; run chmod go-w %s, or choose a directory only the agent's user can write",
		path, ErrUnsafeDir, mode.Perm(), path)
}
