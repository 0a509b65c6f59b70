package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	for _, content := range []string{"one", "two, longer", "3"} {
		if err := WriteFile(path, []byte(content), "state.tmp-*"); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file: %v", len(entries), entries)
	}
}

func TestWriteFileFailsCleanly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if err := WriteFile(filepath.Join(dir, "state"), []byte("x"), "state.tmp-*"); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if err := SyncDir(dir); err == nil {
		t.Fatal("fsync of a missing directory succeeded")
	}
}
