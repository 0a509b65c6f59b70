package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestLockExcludesSecondOpen(t *testing.T) {
	dir := t.TempDir()
	l1, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second LockDir opens the file again: a separate open file
	// description, which flock treats like another process.
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockDir: %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("data directory %s is in use by another agent (pid %d)", dir, os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if err := l1.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
}

func TestLockFileMode(t *testing.T) {
	dir := t.TempDir()
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("lock file mode %o, want 600", perm)
	}
	b, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q, want our pid %d", got, os.Getpid())
	}
}

const lockHelperEnv = "CONCLAVE_STORE_LOCK_HELPER"

// TestLockHelper is not a test: it is the body of the subprocess started by
// TestLockExcludesOtherProcess. It takes the lock, says so, and holds it
// until its stdin closes.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	if _, err := LockDir(dir); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
	// Exit without Unlock: the kernel must release the lock on exit.
	os.Exit(0)
}

func TestLockExcludesOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("helper said %q, %v", line, err)
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("LockDir while another process holds it: %v, want ErrLocked", err)
	} else if want := fmt.Sprintf("(pid %d)", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder %s", err, want)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	// The helper died holding the lock; the kernel released it.
	l, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after the holder exited: %v", err)
	}
	l.Unlock()
}
