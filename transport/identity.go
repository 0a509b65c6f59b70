package transport

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/conclave-agent/conclave/internal/safefile"
)

// KeyFile is the name of the node's identity key inside the data directory.
const KeyFile = "node.key"

// maxKeyFileBytes bounds the key file read (an Ed25519 key is 68 bytes).
const maxKeyFileBytes = 4096

// loadOrCreateIdentity returns the Ed25519 key in dir/node.key, creating it
// on first start. The peer id derives from it, so it must survive restarts:
// members learn our peer id from gossip and admit only that one.
func loadOrCreateIdentity(dir string) (crypto.PrivKey, bool, error) {
	if dir == "" {
		return nil, false, errors.New("transport: data directory is not set")
	}
	path := filepath.Join(dir, KeyFile)
	// Never through a symlink: the key would come from (or reveal) a file
	// someone else chose.
	raw, err := safefile.ReadFile(path, maxKeyFileBytes)
	if err == nil {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, false, fmt.Errorf("transport: node key %s is corrupt: %w", path, err)
		}
		if key.Type() != crypto.Ed25519 {
			return nil, false, fmt.Errorf("transport: node key %s is a %v key, want Ed25519", path, key.Type())
		}
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("transport: read node key: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("transport: generate node key: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("transport: marshal node key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("transport: create data directory: %w", err)
	}
	if err := writeFileAtomic(path, raw, 0o600); err != nil {
		return nil, false, fmt.Errorf("transport: write node key: %w", err)
	}
	return key, true, nil
}

// writeFileAtomic writes through a synced temporary file and a rename, so a
// crash leaves either no key (and a new one is made) or the whole key —
// never a truncated file that would change the peer id.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
