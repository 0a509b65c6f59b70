package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/conclave-agent/conclave/protocols"
)

// The on-disk record, all integers big-endian. Version 2 (written since
// voter configurations are replicated, docs/voters.md):
//
//	offset size field
//	0      4    magic "CNHS"
//	4      2    version (2)
//	6      2    flags: bit 0 = the configuration is known committed;
//	            the other bits zero (version 1: reserved, zero)
//	8      8    term
//	16     8    vote
//	24     8    epoch
//	32     8    configuration term
//	40     8    configuration index
//	48     2    length L of the voter list (at most protocols.MaxVotersLen)
//	50     L    voter list: sorted names joined by ','
//	50+L   4    CRC-32C (Castagnoli) of bytes 0..50+L-1
//
// Version 1 (still read, never written) is the first 32 bytes of the same
// layout followed by the CRC-32C of them: 36 bytes, no configuration.
//
// A new version gets a new number and its own decoder; every version's size
// is bounded so a reader can bound what it reads before allocating.
const (
	recordVersion   = 2
	recordVersionV1 = 1
	// RecordSizeV1 is the exact size in bytes of a version-1 record.
	RecordSizeV1 = 36
	// recordHeaderV2 is the size of a version-2 record without its voter
	// list.
	recordHeaderV2 = 54
	// MaxRecordSize bounds the size of any record this package reads or
	// writes.
	MaxRecordSize = recordHeaderV2 + protocols.MaxVotersLen
)

// flagCommitted marks a configuration known to be committed.
const flagCommitted = 1

var magic = [4]byte{'C', 'N', 'H', 'S'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error that reports a state file whose
// contents cannot be trusted (bad size, magic, version or checksum).
var ErrCorrupt = errors.New("state file is corrupt")

// Encode returns the version-2 record of hs. hs.Config must pass
// Configuration.Check (Save checks it); a longer voter list is truncated to
// the bound so that Encode never produces an oversized record, and such a
// record fails Decode's checks.
func Encode(hs protocols.HardState) []byte {
	voters := hs.Config.Voters
	if len(voters) > protocols.MaxVotersLen {
		voters = voters[:protocols.MaxVotersLen]
	}
	b := make([]byte, recordHeaderV2+len(voters))
	copy(b[0:4], magic[:])
	binary.BigEndian.PutUint16(b[4:6], recordVersion)
	if hs.ConfigCommitted {
		binary.BigEndian.PutUint16(b[6:8], flagCommitted)
	}
	binary.BigEndian.PutUint64(b[8:16], hs.Term)
	binary.BigEndian.PutUint64(b[16:24], uint64(hs.Vote))
	binary.BigEndian.PutUint64(b[24:32], hs.Epoch)
	binary.BigEndian.PutUint64(b[32:40], hs.Config.Term)
	binary.BigEndian.PutUint64(b[40:48], hs.Config.Index)
	binary.BigEndian.PutUint16(b[48:50], uint16(len(voters)))
	copy(b[50:], voters)
	end := len(b) - 4
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli))
	return b
}

// Decode parses a record produced by Encode, or a version-1 record. Every
// error wraps ErrCorrupt.
func Decode(b []byte) (protocols.HardState, error) {
	if len(b) == RecordSizeV1 {
		return decodeV1(b)
	}
	if len(b) < recordHeaderV2 || len(b) > MaxRecordSize {
		return protocols.HardState{}, fmt.Errorf("%w: size %d bytes, want %d or %d to %d", ErrCorrupt, len(b), RecordSizeV1, recordHeaderV2, MaxRecordSize)
	}
	end := len(b) - 4
	// The checksum is checked first so that a flipped bit anywhere is
	// reported as such, rather than as a confusing "unknown version".
	if err := checkSum(b); err != nil {
		return protocols.HardState{}, err
	}
	if err := checkHeader(b, magic, recordVersion, flagCommitted); err != nil {
		return protocols.HardState{}, err
	}
	flags := binary.BigEndian.Uint16(b[6:8])
	if l := int(binary.BigEndian.Uint16(b[48:50])); l != len(b)-recordHeaderV2 {
		return protocols.HardState{}, fmt.Errorf("%w: voter list of %d bytes in a record with room for %d", ErrCorrupt, l, len(b)-recordHeaderV2)
	}
	hs := protocols.HardState{
		Term:  binary.BigEndian.Uint64(b[8:16]),
		Vote:  protocols.ID(binary.BigEndian.Uint64(b[16:24])),
		Epoch: binary.BigEndian.Uint64(b[24:32]),
		Config: protocols.Configuration{
			Term:   binary.BigEndian.Uint64(b[32:40]),
			Index:  binary.BigEndian.Uint64(b[40:48]),
			Voters: string(b[50:end]),
		},
		ConfigCommitted: flags&flagCommitted != 0,
	}
	if hs.ConfigCommitted && hs.Config.Index == 0 {
		return protocols.HardState{}, fmt.Errorf("%w: a bootstrap configuration marked committed", ErrCorrupt)
	}
	if err := hs.Config.Check(); err != nil {
		return protocols.HardState{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if hs.Config.Voters == "" && (hs.Config.Term != 0 || hs.Config.Index != 0) {
		return protocols.HardState{}, fmt.Errorf("%w: configuration %d.%d without voters", ErrCorrupt, hs.Config.Term, hs.Config.Index)
	}
	return hs, nil
}

func decodeV1(b []byte) (protocols.HardState, error) {
	if err := checkSum(b); err != nil {
		return protocols.HardState{}, err
	}
	if err := checkHeader(b, magic, recordVersionV1, 0); err != nil {
		return protocols.HardState{}, err
	}
	return protocols.HardState{
		Term:  binary.BigEndian.Uint64(b[8:16]),
		Vote:  protocols.ID(binary.BigEndian.Uint64(b[16:24])),
		Epoch: binary.BigEndian.Uint64(b[24:32]),
	}, nil
}

// checkSum checks the CRC-32C that ends every record this package
// writes against the bytes before it.
func checkSum(b []byte) error {
	end := len(b) - 4
	if got, want := binary.BigEndian.Uint32(b[end:]), crc32.Checksum(b[:end], castagnoli); got != want {
		return fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	return nil
}

// checkHeader checks the 8-byte header every record of this package
// starts with: its kind's magic, version, and flags of which only allowed
// may be set.
func checkHeader(b []byte, want [4]byte, version, allowed uint16) error {
	if [4]byte(b[0:4]) != want {
		return fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[0:4])
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != version {
		return fmt.Errorf("%w: unknown version %d for a record of %d bytes", ErrCorrupt, v, len(b))
	}
	if r := binary.BigEndian.Uint16(b[6:8]); r&^allowed != 0 {
		return fmt.Errorf("%w: reserved bits %#x set", ErrCorrupt, r&^allowed)
	}
	return nil
}
