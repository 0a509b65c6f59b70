package transport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// node.key used to be read through a symlink: the identity would come from
// a file someone else chose.
func TestNodeKeySymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "someone-elses.key")
	if _, _, err := loadOrCreateIdentity(filepath.Dir(other)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(filepath.Dir(other), KeyFile), other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("loadOrCreateIdentity through a symlinked node.key: %v, want a refusal", err)
	}
}
