package fence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/conclave-agent/conclave/internal/atomicfile"
)

// ErrStale is matched (errors.Is) by every *StaleError: a token lower than
// one already accepted.
var ErrStale = errors.New("stale fencing token")

// StaleError reports a refused token.
type StaleError struct {
	// Token is the refused token.
	Token uint64
	// Highest is the highest token the resource had accepted.
	Highest uint64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("stale fencing token %d: %d already accepted", e.Token, e.Highest)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// The guard file: magic "CNFG", 8-byte big-endian token, CRC-32C of the
// first 12 bytes.
const guardRecordSize = 16

var guardMagic = [4]byte{'C', 'N', 'F', 'G'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by the error OpenGuard returns for a guard file
// whose contents cannot be trusted. The guard refuses to start from it:
// starting from zero would accept stale tokens again.
var ErrCorrupt = errors.New("fence: guard file is corrupt")

// Guard keeps the highest token it has accepted and refuses lower ones. Its
// methods are safe for concurrent use. The zero Guard keeps its token in
// memory only; OpenGuard makes one that survives restarts.
type Guard struct {
	mu      sync.Mutex
	highest uint64
	path    string // "" for a memory-only guard
}

// OpenGuard returns a Guard that keeps its highest token in the file at
// path, written like the agent's own state: temporary file, fsync, rename,
// fsync of the directory. A missing file starts at zero; a corrupt one is
// an error wrapping ErrCorrupt.
func OpenGuard(path string) (*Guard, error) {
	if path == "" {
		return nil, errors.New("fence: empty guard file path")
	}
	g := &Guard{path: path}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fence: open guard file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, guardRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("fence: read guard file %s: %w", path, err)
	}
	if g.highest, err = decodeGuard(b); err != nil {
		return nil, fmt.Errorf("fence: guard file %s: %w", path, err)
	}
	return g, nil
}

func encodeGuard(token uint64) []byte {
	b := make([]byte, guardRecordSize)
	copy(b[:4], guardMagic[:])
	binary.BigEndian.PutUint64(b[4:12], token)
	binary.BigEndian.PutUint32(b[12:16], crc32.Checksum(b[:12], castagnoli))
	return b
}

func decodeGuard(b []byte) (uint64, error) {
	if len(b) != guardRecordSize {
		return 0, fmt.Errorf("%w: size %d bytes, want %d", ErrCorrupt, len(b), guardRecordSize)
	}
	if got, want := binary.BigEndian.Uint32(b[12:16]), crc32.Checksum(b[:12], castagnoli); got != want {
		return 0, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if [4]byte(b[:4]) != guardMagic {
		return 0, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:4])
	}
	return binary.BigEndian.Uint64(b[4:12]), nil
}

// Highest returns the highest token accepted so far (0 if none).
func (g *Guard) Highest() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}

// Accept accepts token if no higher token was accepted before, and makes
// it the highest (durably, before returning, for a file-backed guard). A
// lower token gets a *StaleError. An equal token is accepted again: one
// leadership does many things.
func (g *Guard) Accept(token uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accept(token)
}

func (g *Guard) accept(token uint64) error {
	if token < g.highest {
		return &StaleError{Token: token, Highest: g.highest}
	}
	if token == g.highest {
		return nil
	}
	if g.path != "" {
		if err := writeFile(g.path, encodeGuard(token)); err != nil {
			return fmt.Errorf("fence: raise to %d: %w", token, err)
		}
	}
	g.highest = token
	return nil
}

// Do runs fn only if token is accepted, holding the guard while fn runs so
// that no higher token is accepted between the check and the side effect.
// fn runs at most once; its error is returned as is.
func (g *Guard) Do(token uint64, fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.accept(token); err != nil {
		return err
	}
	return fn()
}

func writeFile(path string, b []byte) error {
	return atomicfile.WriteFile(path, b, filepath.Base(path)+".tmp-*")
}
