package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/conclave-agent/conclave/protocols"
)

// The on-disk record, all integers big-endian:
//
//	offset size field
//	0      4    magic "CNHS"
//	4      2    version (1)
//	6      2    reserved, zero
//	8      8    term
//	16     8    vote
//	24     8    epoch
//	32     4    CRC-32C (Castagnoli) of bytes 0..31
//
// A new version gets a new number and its own decoder; the size of every
// version is fixed so a reader can bound what it reads before allocating.
const (
	recordVersion = 1
	// RecordSize is the exact size in bytes of an encoded HardState.
	RecordSize = 36
)

var magic = [4]byte{'C', 'N', 'H', 'S'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error that reports a state file whose
// contents cannot be trusted (bad size, magic, version or checksum).
var ErrCorrupt = errors.New("state file is corrupt")

// Encode returns the fixed-size binary record of hs.
func Encode(hs protocols.HardState) []byte {
	b := make([]byte, RecordSize)
	copy(b[0:4], magic[:])
	binary.BigEndian.PutUint16(b[4:6], recordVersion)
	binary.BigEndian.PutUint64(b[8:16], hs.Term)
	binary.BigEndian.PutUint64(b[16:24], uint64(hs.Vote))
	binary.BigEndian.PutUint64(b[24:32], hs.Epoch)
	binary.BigEndian.PutUint32(b[32:36], crc32.Checksum(b[:32], castagnoli))
	return b
}

// Decode parses a record produced by Encode. Every error wraps ErrCorrupt.
func Decode(b []byte) (protocols.HardState, error) {
	if len(b) != RecordSize {
		return protocols.HardState{}, fmt.Errorf("%w: size %d bytes, want %d", ErrCorrupt, len(b), RecordSize)
	}
	// The checksum is checked first so that a flipped bit anywhere is
	// reported as such, rather than as a confusing "unknown version".
	if got, want := binary.BigEndian.Uint32(b[32:36]), crc32.Checksum(b[:32], castagnoli); got != want {
		return protocols.HardState{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if [4]byte(b[0:4]) != magic {
		return protocols.HardState{}, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[0:4])
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != recordVersion {
		return protocols.HardState{}, fmt.Errorf("%w: unknown version %d", ErrCorrupt, v)
	}
	if r := binary.BigEndian.Uint16(b[6:8]); r != 0 {
		return protocols.HardState{}, fmt.Errorf("%w: reserved field is %d, want 0", ErrCorrupt, r)
	}
	return protocols.HardState{
		Term:  binary.BigEndian.Uint64(b[8:16]),
		Vote:  protocols.ID(binary.BigEndian.Uint64(b[16:24])),
		Epoch: binary.BigEndian.Uint64(b[24:32]),
	}, nil
}
