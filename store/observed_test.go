package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

func TestObservedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	// A data directory written before the file existed: no floor.
	if e, err := s.LoadObserved(); err != nil || e != 0 {
		t.Fatalf("missing file: %d, %v; want 0, nil", e, err)
	}
	for _, e := range []uint64{0, 7, 7, 9, protocols.Ceiling} {
		if err := s.SaveObserved(e); err != nil {
			t.Fatalf("save %d: %v", e, err)
		}
		got, err := openT(t, dir).LoadObserved()
		if err != nil || got != e {
			t.Fatalf("after saving %d a fresh store loads %d, %v", e, got, err)
		}
	}
	// The state record is a file of its own, untouched.
	if hs, err := s.Load(); err != nil || hs != (protocols.HardState{}) {
		t.Fatalf("state record: %+v, %v", hs, err)
	}
}

func TestObservedRefusesRegressionAndCeiling(t *testing.T) {
	dir := t.TempDir()
	if err := openT(t, dir).SaveObserved(9); err != nil {
		t.Fatal(err)
	}
	// A fresh Store checks against the file even without LoadObserved.
	s := openT(t, dir)
	if err := s.SaveObserved(8); !errors.Is(err, ErrRegression) {
		t.Fatalf("saving 8 over 9: %v, want ErrRegression", err)
	}
	if err := s.SaveObserved(protocols.Ceiling + 1); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("saving above the ceiling: %v, want ErrBeyondCeiling", err)
	}
	if e, err := s.LoadObserved(); err != nil || e != 9 {
		t.Fatalf("after refused saves: %d, %v; want 9", e, err)
	}
}

func TestObservedAboveCeilingRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ObservedFileName)
	if err := os.WriteFile(path, EncodeObserved(protocols.Ceiling+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openT(t, dir).LoadObserved()
	if !errors.Is(err, protocols.ErrBeyondCeiling) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want ErrBeyondCeiling naming %s", err, path)
	}
}

// Every damaged file is an error naming it, never a silent floor of 0,
// and SaveObserved does not overwrite it.
func TestObservedCorruptionDetected(t *testing.T) {
	good := EncodeObserved(42)
	var bad [][]byte
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		bad = append(bad, b)
	}
	for n := range len(good) {
		bad = append(bad, good[:n])
	}
	bad = append(bad, append(bytes.Clone(good), 0))
	for i, b := range bad {
		dir := t.TempDir()
		path := filepath.Join(dir, ObservedFileName)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := openT(t, dir)
		_, err := s.LoadObserved()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("case %d (% x): got %v, want ErrCorrupt naming %s", i, b, err, path)
		}
		if err := s.SaveObserved(50); err == nil {
			t.Fatalf("case %d: SaveObserved overwrote a corrupt file", i)
		}
	}
}

func TestObservedSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, EncodeObserved(3), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, ObservedFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := openT(t, dir).LoadObserved(); err == nil {
		t.Fatal("LoadObserved read the file through a symlink")
	}
}

func TestObservedCrashLeftoversCleaned(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, observedTmpPrefix+"123")
	if err := os.WriteFile(left, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openT(t, dir)
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temporary file still there: %v", err)
	}
	if err := s.SaveObserved(5); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ObservedFileName {
		t.Fatalf("data directory holds %v, want only %s", entries, ObservedFileName)
	}
}

func FuzzDecodeObserved(f *testing.F) {
	f.Add(EncodeObserved(0))
	f.Add(EncodeObserved(7))
	f.Add(EncodeObserved(protocols.Ceiling + 1))
	f.Add([]byte{})
	f.Add([]byte("CNOE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeObserved(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeObserved error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// One encoding per epoch: anything accepted re-encodes as itself.
		if again := EncodeObserved(e); !bytes.Equal(again, b) {
			t.Fatalf("DecodeObserved accepted % x, which re-encodes as % x", b, again)
		}
		if binary.BigEndian.Uint64(b[8:16]) != e {
			t.Fatalf("decoded %d from % x", e, b)
		}
	})
}
