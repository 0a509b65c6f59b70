package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	states := []protocols.HardState{
		{Term: 1, Vote: 3, Epoch: 1},
		{Term: 2, Vote: 0, Epoch: 2},
		{Term: 2, Vote: 7, Epoch: 2},
		{Term: protocols.Ceiling, Vote: protocols.ID(1<<64 - 1), Epoch: protocols.Ceiling},
	}
	for _, want := range states {
		if err := s.Save(want); err != nil {
			t.Fatalf("Save(%+v): %v", want, err)
		}
		// A fresh Store sees only what is on disk.
		got, err := openT(t, dir).Load()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Load = %+v, want %+v", got, want)
		}
	}
}

func TestMissingFileIsFreshNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	s := openT(t, dir)
	hs, err := s.Load()
	if err != nil {
		t.Fatalf("Load on a fresh directory: %v", err)
	}
	if !hs.IsZero() {
		t.Fatalf("Load = %+v, want zero", hs)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Fatalf("data directory mode %o, want 700", perm)
	}
}

func TestFileMode(t *testing.T) {
	s := openT(t, t.TempDir())
	if err := s.Save(protocols.HardState{Term: 1}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("state file mode %o, want 600", perm)
	}
}

// loadBytes writes b as the state file of a fresh directory and loads it.
func loadBytes(t *testing.T, b []byte) (protocols.HardState, string, error) {
	t.Helper()
	s := openT(t, t.TempDir())
	if err := os.WriteFile(s.Path(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err := s.Load()
	return hs, s.Path(), err
}

func checkCorrupt(t *testing.T, err error, path, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: Load succeeded, want an error", what)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: error %v does not wrap ErrCorrupt", what, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("%s: error %q does not name %s", what, err, path)
	}
}

func TestEverySingleByteCorruptionDetected(t *testing.T) {
	good := Encode(protocols.HardState{Term: 5, Vote: 2, Epoch: 5, Config: protocols.Configuration{Term: 4, Index: 3, Voters: "a,b"}})
	// One directory for all cases keeps the test quick; each case rewrites
	// the file.
	s := openT(t, t.TempDir())
	for i := range good {
		for x := 1; x < 256; x++ {
			b := bytes.Clone(good)
			b[i] ^= byte(x)
			if err := os.WriteFile(s.Path(), b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Load()
			if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), s.Path()) {
				t.Fatalf("byte %d xor %#x: Load error = %v, want ErrCorrupt naming the file", i, x, err)
			}
		}
	}
}

func TestEveryTruncationDetected(t *testing.T) {
	good := Encode(protocols.HardState{Term: 5, Vote: 2, Epoch: 5, Config: protocols.Configuration{Term: 4, Index: 3, Voters: "a,b"}})
	for n := 0; n < len(good); n++ {
		_, path, err := loadBytes(t, good[:n])
		checkCorrupt(t, err, path, fmt.Sprintf("truncated to %d bytes", n))
	}
}

func TestOversizedDetected(t *testing.T) {
	good := Encode(protocols.HardState{Term: 5, Vote: 2, Epoch: 5})
	for _, extra := range [][]byte{{0}, []byte("\n"), bytes.Repeat([]byte{0xAB}, 1<<20)} {
		_, path, err := loadBytes(t, append(bytes.Clone(good), extra...))
		checkCorrupt(t, err, path, "oversized")
		if len(good)+len(extra) > MaxRecordSize && !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("oversized: error %q does not say the file is too large", err)
		}
	}
}

func TestSaveDoesNotOverwriteCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	garbage := []byte("not a state file")
	if err := os.WriteFile(s.Path(), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(protocols.HardState{Term: 1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Save over a corrupt file: %v, want ErrCorrupt", err)
	}
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, garbage) {
		t.Fatal("corrupt state file was overwritten")
	}
}

func TestSaveRefusesRegression(t *testing.T) {
	s := openT(t, t.TempDir())
	base := protocols.HardState{Term: 5, Vote: 2, Epoch: 5}
	if err := s.Save(base); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []protocols.HardState{
		{Term: 4, Vote: 2, Epoch: 5},
		{Term: 5, Vote: 2, Epoch: 4},
		{Term: 5, Vote: 3, Epoch: 5},
		{Term: 5, Vote: 0, Epoch: 5},
	} {
		if err := s.Save(bad); !errors.Is(err, ErrRegression) {
			t.Errorf("Save(%+v) after %+v: %v, want ErrRegression", bad, base, err)
		}
	}
	// A new Store learns the bound from the file, not from memory.
	if err := openT(t, filepath.Dir(s.Path())).Save(protocols.HardState{Term: 4}); !errors.Is(err, ErrRegression) {
		t.Errorf("fresh Store saving term 4 over term 5: %v, want ErrRegression", err)
	}
	for _, ok := range []protocols.HardState{
		{Term: 5, Vote: 2, Epoch: 5},
		{Term: 6, Vote: 0, Epoch: 6},
		{Term: 6, Vote: 4, Epoch: 6},
	} {
		if err := s.Save(ok); err != nil {
			t.Errorf("Save(%+v): %v", ok, err)
		}
	}
}

func TestCrashLeftoversIgnoredAndCleaned(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	want := protocols.HardState{Term: 3, Vote: 1, Epoch: 3}
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	// What a crash between CreateTemp and Rename leaves: a temporary file
	// with a partial (here: newer) record, and one that is empty.
	newer := Encode(protocols.HardState{Term: 4, Vote: 1, Epoch: 4})
	leftovers := []string{filepath.Join(dir, tmpPrefix+"123"), filepath.Join(dir, tmpPrefix+"456")}
	if err := os.WriteFile(leftovers[0], newer[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftovers[1], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "agent.sock.keep")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := openT(t, dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Load = %+v, want %+v", got, want)
	}
	for _, p := range leftovers {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s not removed: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("Open removed an unrelated file: %v", err)
	}
}

func TestSaveLeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for i := uint64(1); i <= 3; i++ {
		if err := s.Save(protocols.HardState{Term: i, Epoch: i}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != FileName {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only %s", names, FileName)
	}
}

func TestSaveFailsInUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root ignores directory permissions; simulate the failure by
		// removing the directory instead.
		dir := filepath.Join(t.TempDir(), "d")
		s := openT(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		err := s.Save(protocols.HardState{Term: 1})
		if err == nil || !strings.Contains(err.Error(), "store:") {
			t.Fatalf("Save into a removed directory: %v, want a store error", err)
		}
		return
	}
	dir := t.TempDir()
	s := openT(t, dir)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if err := s.Save(protocols.HardState{Term: 1}); err == nil {
		t.Fatal("Save into a read-only directory succeeded")
	}
}

func BenchmarkSave(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var term uint64
	for b.Loop() {
		term++
		if err := s.Save(protocols.HardState{Term: term, Vote: 1, Epoch: term}); err != nil {
			b.Fatal(err)
		}
	}
}

// A record above the ceiling (term = epoch = 2^64−2, written by a
// buggy build or restored from the wrong backup) decodes fine but must be
// refused at start, naming the file and what to do; Save never writes one.
func TestStateAboveCeilingRefused(t *testing.T) {
	dir := t.TempDir()
	bad := protocols.HardState{Term: 1<<64 - 2, Vote: 1, Epoch: 1<<64 - 2}
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, Encode(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openT(t, dir).Load()
	if !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("Load = %v, want ErrBeyondCeiling", err)
	}
	for _, want := range []string{path, "deleting the file", "ceiling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	s := openT(t, t.TempDir())
	if err := s.Save(bad); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Errorf("Save(%+v) = %v, want ErrBeyondCeiling", bad, err)
	}
}

// A LOCK or state record that is a symlink is refused, not followed: the
// agent used to truncate the LOCK's target to write its pid there.
func TestSymlinksInDataDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("do not touch"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, LockFileName)); err != nil {
		t.Fatal(err)
	}
	if l, err := LockDir(dir); err == nil {
		l.Unlock()
		t.Fatal("LockDir followed a symlinked LOCK")
	}
	if b, _ := os.ReadFile(target); string(b) != "do not touch" {
		t.Fatalf("the LOCK's target was changed: %q", b)
	}
	dir2 := t.TempDir()
	if err := os.Symlink(target, filepath.Join(dir2, FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := openT(t, dir2).Load(); err == nil {
		t.Fatal("Load read the state record through a symlink")
	}
}

// A data directory other users may write to is refused, naming the fix.
func TestDataDirectoryWritableByOthersRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := LockDir(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("LockDir on a 0777 directory: %v, want a refusal naming the fix", err)
	}
}
