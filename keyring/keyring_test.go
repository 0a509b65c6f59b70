package keyring

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// A rotation's three steps, each run twice: the second run changes
// nothing, so a half-finished rotation can be run again from the start.
func TestRotationStepsAreIdempotent(t *testing.T) {
	old, next := key(1), key(2)
	r := New(old)
	for range 2 {
		var err error
		if r, err = r.Install(next); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Keys()) != 2 || !bytes.Equal(r.Primary(), old) {
		t.Fatalf("after install: %d keys, primary %s", len(r.Keys()), Fingerprint(r.Primary()))
	}
	for range 2 {
		var err error
		if r, err = r.Use(next); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(r.Primary(), next) || !r.Has(old) {
		t.Fatalf("after use: primary %s, old installed %v", Fingerprint(r.Primary()), r.Has(old))
	}
	for range 2 {
		var err error
		if r, err = r.Remove(old); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Keys()) != 1 || r.Has(old) {
		t.Fatalf("after remove: %d keys, old installed %v", len(r.Keys()), r.Has(old))
	}
}

func TestRefusals(t *testing.T) {
	r := New(key(1))
	if _, err := r.Remove(key(1)); err == nil || !strings.Contains(err.Error(), "agent keys use") {
		t.Errorf("removing the primary: %v, want a refusal saying to use another key first", err)
	}
	if _, err := r.Use(key(9)); err == nil || !strings.Contains(err.Error(), "agent keys install") {
		t.Errorf("using a key not installed: %v, want a refusal saying to install it", err)
	}
	for i := 2; i <= MaxKeys; i++ {
		var err error
		if r, err = r.Install(key(byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Install(key(99)); err == nil {
		t.Errorf("installing key %d: accepted, want a refusal beyond MaxKeys", MaxKeys+1)
	}
	for _, s := range []string{"", "!!", "AAAA", Encode(make([]byte, 20))} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

// The file round-trips, is written 0600, and is never read through a
// symlink.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	if r, err := Load(dir); err != nil || !r.Empty() {
		t.Fatalf("Load of a missing file: %v, %v; want an empty ring", r, err)
	}
	r := New(key(1))
	r, _ = r.Install(key(2))
	r, _ = r.Use(key(2))
	if err := Save(dir, r); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("keyring file mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Primary(), key(2)) || !got.Has(key(1)) || len(got.Keys()) != 2 {
		t.Errorf("loaded ring: primary %s, %d keys", Fingerprint(got.Primary()), len(got.Keys()))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data directory holds %d entries after Save, want only %s", len(entries), File)
	}

	// A symlink in its place is refused, not followed.
	other := t.TempDir()
	if err := Save(other, New(key(7))); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(other, File), filepath.Join(linked, File)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(linked); err == nil {
		t.Error("Load followed a symlink to another keyring")
	}
	// Saving over the symlink replaces the link, never the file it names.
	if err := Save(linked, New(key(8))); err != nil {
		t.Fatal(err)
	}
	if r, err := Load(other); err != nil || !bytes.Equal(r.Primary(), key(7)) {
		t.Errorf("Save through a symlink changed its target: %v", err)
	}
}

func TestUnmarshalRefusesWhatMarshalWouldNotWrite(t *testing.T) {
	k1, k2 := Encode(key(1)), Encode(key(2))
	for name, body := range map[string]string{
		"unknown field":   `{"version":1,"primary":"` + k1 + `","keys":["` + k1 + `"],"x":1}`,
		"version":         `{"version":2,"primary":"` + k1 + `","keys":["` + k1 + `"]}`,
		"primary missing": `{"version":1,"primary":"` + k1 + `","keys":["` + k2 + `"]}`,
		"repeated":        `{"version":1,"primary":"` + k1 + `","keys":["` + k1 + `","` + k2 + `","` + k2 + `"]}`,
		"no keys":         `{"version":1,"primary":"` + k1 + `","keys":[]}`,
		"bad key":         `{"version":1,"primary":"` + k1 + `","keys":["` + k1 + `","AAAA"]}`,
		"two values":      `{"version":1,"primary":"` + k1 + `","keys":["` + k1 + `"]} {}`,
		"too large":       strings.Repeat(" ", maxFileBytes+1),
		"not json":        `keys`,
	} {
		if _, err := Unmarshal([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzUnmarshal: any input either fails or decodes to a ring that
// Marshal writes back to a file that decodes to the same ring.
func FuzzUnmarshal(f *testing.F) {
	r := New(key(1))
	r, _ = r.Install(key(2))
	b, _ := r.Marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1,"primary":"` + Encode(key(3)[:16]) + `","keys":["` + Encode(key(3)[:16]) + `"]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Unmarshal(b)
		if err != nil {
			return
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatalf("decoded ring does not encode: %v", err)
		}
		again, err := Unmarshal(out)
		if err != nil {
			t.Fatalf("re-encoded ring does not decode: %v\n%s", err, out)
		}
		if !bytes.Equal(again.Primary(), r.Primary()) || len(again.Keys()) != len(r.Keys()) {
			t.Fatalf("round trip changed the ring")
		}
	})
}
