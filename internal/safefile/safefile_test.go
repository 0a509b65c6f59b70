package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenFileRefusesSymlinkAndNonRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "LOCK")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(link, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); !errors.Is(err, ErrSymlink) {
		t.Fatalf("OpenFile(symlink) = %v, want ErrSymlink", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Fatalf("the symlink's target was changed: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Open(fifo) = %v, want a refusal (and no hang)", err)
	}
	f, err := OpenFile(filepath.Join(dir, "new"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	if err := CheckDir(dir, false); err != nil {
		t.Fatalf("a 0700 directory refused: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := CheckDir(dir, false)
	if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("CheckDir(0777) = %v, want ErrUnsafeDir naming the fix", err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir, true); err != nil {
		t.Fatalf("a sticky directory refused with allowSticky: %v", err)
	}
	if err := CheckDir(dir, false); err == nil {
		t.Fatal("a sticky world-writable data directory accepted")
	}
	os.Chmod(dir, 0o700)
}
