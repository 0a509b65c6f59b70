// Package keyring holds the cluster keys an agent accepts: several
// installed keys, one of them primary. Gossip is encrypted with the primary
// and decrypted with any installed key, and the election transport admits
// a peer that proves any installed key, so a cluster rotates its key with
// no downtime: install the new key everywhere, make it primary everywhere,
// then remove the old one (docs/security.md).
//
// The ring is persisted in the data directory (File): written atomically
// with mode 0600, read without following a symlink, and bounded in size
// before it is decoded.
package keyring

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/conclave-agent/conclave/internal/atomicfile"
	"github.com/conclave-agent/conclave/internal/safefile"
)

// File is the keyring's name inside the data directory.
const File = "keyring.json"

// MaxKeys bounds the installed keys: a rotation needs two; a few more
// leave room for a rotation begun before the last one ended.
const MaxKeys = 8

// maxFileBytes bounds the file read before decoding: MaxKeys keys of 44
// base64 characters and their quotes fit many times over.
const maxFileBytes = 4096

// Ring is a set of installed keys and the primary among them. The zero
// Ring has no keys: no encryption. A Ring is a value; its methods return
// changed copies.
type Ring struct {
	keys [][]byte // installed, primary first
}

// ParseKey decodes a cluster key: standard base64 of 16, 24 or 32 bytes
// (AES-128, -192 or -256).
func ParseKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("keyring: key is not standard base64 (generate one with \"agent keygen\"): %w", err)
	}
	switch len(b) {
	case 16, 24, 32:
		return b, nil
	}
	return nil, fmt.Errorf("keyring: key decodes to %d bytes, want 16, 24 or 32 (generate one with \"agent keygen\")", len(b))
}

// Encode returns key in the form the configuration and the CLI take.
func Encode(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

// Fingerprint names a key in logs, problems and metrics without revealing
// it: the first 8 hex digits of SHA-256 over a domain string and the key.
func Fingerprint(key []byte) string {
	h := sha256.Sum256(append([]byte("conclave key fingerprint v1\x00"), key...))
	return hex.EncodeToString(h[:4])
}

// New returns a ring holding key alone, as primary.
func New(key []byte) Ring {
	return Ring{keys: [][]byte{slices.Clone(key)}}
}

// Empty reports whether the ring has no keys.
func (r Ring) Empty() bool { return len(r.keys) == 0 }

// Primary returns the key gossip is encrypted with, nil for an empty ring.
func (r Ring) Primary() []byte {
	if r.Empty() {
		return nil
	}
	return slices.Clone(r.keys[0])
}

// Keys returns every installed key, primary first.
func (r Ring) Keys() [][]byte {
	out := make([][]byte, len(r.keys))
	for i, k := range r.keys {
		out[i] = slices.Clone(k)
	}
	return out
}

// Has reports whether key is installed.
func (r Ring) Has(key []byte) bool {
	return slices.ContainsFunc(r.keys, func(k []byte) bool { return bytes.Equal(k, key) })
}

// Install adds key; installing an installed key changes nothing, so a
// rotation step can be run again.
func (r Ring) Install(key []byte) (Ring, error) {
	if r.Has(key) {
		return r, nil
	}
	if len(r.keys) >= MaxKeys {
		return r, fmt.Errorf("keyring: %d keys are installed, the most allowed: remove one first (agent keys remove KEY)", len(r.keys))
	}
	out := Ring{keys: append(r.cloneKeys(), slices.Clone(key))}
	return out, nil
}

// Use makes an installed key the primary; using the primary changes
// nothing.
func (r Ring) Use(key []byte) (Ring, error) {
	i := slices.IndexFunc(r.keys, func(k []byte) bool { return bytes.Equal(k, key) })
	if i < 0 {
		return r, fmt.Errorf("keyring: key %s is not installed: install it first (agent keys install KEY)", Fingerprint(key))
	}
	keys := r.cloneKeys()
	k := keys[i]
	keys = slices.Delete(keys, i, i+1)
	return Ring{keys: append([][]byte{k}, keys...)}, nil
}

// Remove drops a key; removing a key that is not installed changes
// nothing. The primary cannot be removed: make another key primary first.
func (r Ring) Remove(key []byte) (Ring, error) {
	i := slices.IndexFunc(r.keys, func(k []byte) bool { return bytes.Equal(k, key) })
	if i < 0 {
		return r, nil
	}
	if i == 0 {
		return r, fmt.Errorf("keyring: key %s is the primary: make another key primary first (agent keys use KEY)", Fingerprint(key))
	}
	keys := r.cloneKeys()
	return Ring{keys: slices.Delete(keys, i, i+1)}, nil
}

func (r Ring) cloneKeys() [][]byte {
	out := make([][]byte, len(r.keys))
	for i, k := range r.keys {
		out[i] = slices.Clone(k)
	}
	return out
}

// fileFormat is the keyring file: the primary, then every installed key
// (the primary among them), each in standard base64.
type fileFormat struct {
	Version int      `json:"version"`
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
}

const fileVersion = 1

// Marshal encodes r as the keyring file holds it.
func (r Ring) Marshal() ([]byte, error) {
	if r.Empty() {
		return nil, errors.New("keyring: an empty ring is not written: without keys there is nothing to keep")
	}
	f := fileFormat{Version: fileVersion, Primary: Encode(r.keys[0])}
	for _, k := range r.keys {
		f.Keys = append(f.Keys, Encode(k))
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return append(b, '\n'), nil
}

// Unmarshal decodes a keyring file, refusing anything Marshal would not
// write: unknown fields, a version it does not know, a bad or repeated
// key, too many keys, a primary that is not installed.
func Unmarshal(b []byte) (Ring, error) {
	if len(b) > maxFileBytes {
		return Ring{}, fmt.Errorf("keyring: file of %d bytes, at most %d", len(b), maxFileBytes)
	}
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Ring{}, fmt.Errorf("keyring: not a keyring file: %w", err)
	}
	if dec.More() {
		return Ring{}, errors.New("keyring: more than one JSON value")
	}
	if f.Version != fileVersion {
		return Ring{}, fmt.Errorf("keyring: version %d, this agent reads version %d", f.Version, fileVersion)
	}
	if len(f.Keys) == 0 || len(f.Keys) > MaxKeys {
		return Ring{}, fmt.Errorf("keyring: %d keys, want 1 … %d", len(f.Keys), MaxKeys)
	}
	primary, err := ParseKey(f.Primary)
	if err != nil {
		return Ring{}, fmt.Errorf("keyring: primary: %w", err)
	}
	r := Ring{keys: [][]byte{primary}}
	seenPrimary := false
	for i, s := range f.Keys {
		k, err := ParseKey(s)
		if err != nil {
			return Ring{}, fmt.Errorf("keyring: keys[%d]: %w", i, err)
		}
		if bytes.Equal(k, primary) {
			if seenPrimary {
				return Ring{}, fmt.Errorf("keyring: keys[%d] repeats the primary", i)
			}
			seenPrimary = true
			continue
		}
		if r.Has(k) {
			return Ring{}, fmt.Errorf("keyring: keys[%d] is listed twice", i)
		}
		r.keys = append(r.keys, k)
	}
	if !seenPrimary {
		return Ring{}, errors.New("keyring: the primary is not among the installed keys")
	}
	return r, nil
}

// Load reads dir/File. A missing file is an empty ring and no error.
func Load(dir string) (Ring, error) {
	path := filepath.Join(dir, File)
	b, err := safefile.ReadFile(path, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Ring{}, nil
	}
	if err != nil {
		return Ring{}, fmt.Errorf("keyring: read %s: %w", path, err)
	}
	r, err := Unmarshal(b)
	if err != nil {
		return Ring{}, fmt.Errorf("%s: %w: restore it from a member's copy, or delete it to start again from gossip.key", path, err)
	}
	return r, nil
}

// Save durably replaces dir/File with r, mode 0600. The temporary file is
// created exclusively and renamed over the old one, so no symlink at
// either name is ever followed.
func Save(dir string, r Ring) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, File)
	if err := atomicfile.WriteFile(path, b, "."+File+".tmp*"); err != nil {
		return fmt.Errorf("keyring: save %s: %w", path, err)
	}
	return nil
}
