package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/conclave-agent/conclave/internal/atomicfile"
	"github.com/conclave-agent/conclave/internal/safefile"
	"github.com/conclave-agent/conclave/protocols"
)

// ObservedFileName is the file, inside the data directory, that keeps the
// highest epoch this agent reported from gossip (core.Ready.ObservedEpoch):
// the floor below which its reported epoch never goes after a restart
// (docs/design.md §1.2). It is a file of its own, not a field of the
// state record, so that the protocol's HardState stays the protocol's and
// an older agent, which does not know the file, still starts from a
// newer data directory (it then ignores the floor).
const ObservedFileName = "observed"

// observedTmpPrefix starts the name of every temporary file SaveObserved
// creates; Open removes those a crash left behind.
const observedTmpPrefix = ObservedFileName + ".tmp-"

// The observed-epoch record, all integers big-endian:
//
//	offset size field
//	0      4    magic "CNOE"
//	4      2    version (1)
//	6      2    flags, zero
//	8      8    epoch
//	16     4    CRC-32C (Castagnoli) of bytes 0..15
const (
	observedVersion = 1
	// ObservedRecordSize is the exact size in bytes of an observed-epoch
	// record.
	ObservedRecordSize = 20
)

var observedMagic = [4]byte{'C', 'N', 'O', 'E'}

// EncodeObserved returns the record of an observed epoch.
func EncodeObserved(epoch uint64) []byte {
	b := make([]byte, ObservedRecordSize)
	copy(b[0:4], observedMagic[:])
	binary.BigEndian.PutUint16(b[4:6], observedVersion)
	binary.BigEndian.PutUint64(b[8:16], epoch)
	binary.BigEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], castagnoli))
	return b
}

// DecodeObserved parses a record produced by EncodeObserved. Every error
// wraps ErrCorrupt.
func DecodeObserved(b []byte) (uint64, error) {
	if len(b) != ObservedRecordSize {
		return 0, fmt.Errorf("%w: size %d bytes, want %d", ErrCorrupt, len(b), ObservedRecordSize)
	}
	if err := checkSum(b); err != nil {
		return 0, err
	}
	if err := checkHeader(b, observedMagic, observedVersion, 0); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[8:16]), nil
}

// ObservedPath returns the path of the observed-epoch file.
func (s *Store) ObservedPath() string { return filepath.Join(s.dir, ObservedFileName) }

// LoadObserved reads the observed-epoch file. A missing file yields 0 and
// no error (an agent that never reported an epoch from gossip, or a data
// directory written before the file existed); a file that cannot be
// trusted, or an epoch above protocols.Ceiling, yields an error naming it.
func (s *Store) LoadObserved() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.loadObserved()
	if err != nil {
		return 0, err
	}
	s.observed, s.observedLoaded = e, true
	return e, nil
}

func (s *Store) loadObserved() (uint64, error) {
	path := s.ObservedPath()
	f, err := safefile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: open observed-epoch file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, ObservedRecordSize+1))
	if err != nil {
		return 0, fmt.Errorf("store: read observed-epoch file %s: %w", path, err)
	}
	e, err := DecodeObserved(b)
	if err != nil {
		return 0, fmt.Errorf("store: observed-epoch file %s: %w (refusing to start from a lower floor; restore it or delete it, "+
			"after which this agent may report an older epoch until it hears the leader)", path, err)
	}
	if e > protocols.Ceiling {
		return 0, fmt.Errorf("store: observed-epoch file %s: %w: epoch %d (the ceiling is %d); no leader can hold it. "+
			"Delete the file, after which this agent may report an older epoch until it hears the leader", path, protocols.ErrBeyondCeiling, e, protocols.Ceiling)
	}
	return e, nil
}

// SaveObserved makes epoch durable before returning, as Save does the
// state. It refuses (wrapping ErrRegression) an epoch below the one on
// disk and (wrapping protocols.ErrBeyondCeiling) one above the ceiling.
func (s *Store) SaveObserved(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.ObservedPath()
	if !s.observedLoaded {
		prev, err := s.loadObserved()
		if err != nil {
			return err
		}
		s.observed, s.observedLoaded = prev, true
	}
	if epoch > protocols.Ceiling {
		return fmt.Errorf("store: save %s: %w: epoch %d", path, protocols.ErrBeyondCeiling, epoch)
	}
	if epoch < s.observed {
		return fmt.Errorf("store: save %s: %w: observed epoch %d < %d", path, ErrRegression, epoch, s.observed)
	}
	if err := atomicfile.WriteFile(path, EncodeObserved(epoch), observedTmpPrefix+"*"); err != nil {
		return fmt.Errorf("store: save %s: %w", path, err)
	}
	s.observed = epoch
	return nil
}
