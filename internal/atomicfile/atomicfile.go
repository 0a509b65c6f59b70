// Package atomicfile replaces small files durably: the new content is
// written to a temporary file in the same directory (mode 0600), fsync'ed,
// renamed over the old file, and the directory is fsync'ed so the rename
// itself survives a crash. A reader sees the old content or the new, never
// a mix. It must never leave a temporary file behind on failure before the
// rename, and never remove one after it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile durably replaces path with data. The temporary file is named
// by tmpPattern (os.CreateTemp syntax) in path's directory, so a caller can
// recognise and clean leftovers of a crash mid-write.
func WriteFile(path string, data []byte, tmpPattern string) (err error) {
	dir := filepath.Dir(path)
	// CreateTemp opens with mode 0600: durable state is nobody else's business.
	f, err := os.CreateTemp(dir, tmpPattern)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	// The rename is only durable once the directory entry is on disk. From
	// here on the temporary file is gone, so a failure must not remove it.
	if derr := SyncDir(dir); derr != nil {
		return derr
	}
	return nil
}

// SyncDir fsyncs a directory, making renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
