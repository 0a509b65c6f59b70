package transport

import (
	"encoding/binary"
)

// The hand-written side of the message codec. A coalesced frame carries
// every election's messages, so encoding and decoding are paid per message
// per election; msgpack/v5's reflection cost half the CPU of a heartbeat
// round of 50 elections (BenchmarkCoalesced). These write and read exactly
// the bytes msgpack/v5 writes for wireMessage with compact integers, which
// TestEncodeMatchesMsgpack and TestDecodeMatchesMsgpack hold them to, and
// test/compat's golden frames hold to the release's.

// Indexes of wireMessage's fields, in its declaration order, which is the
// order msgpack writes them in.
const (
	wireKeyKind = iota
	wireKeyFrom
	wireKeyTo
	wireKeyTerm
	wireKeyEpoch
	wireKeyReject
	wireKeyLeader
	wireKeyCandidate
	wireKeyPhase
	wireKeyHops
	wireKeyDirection
	wireKeyContext
	wireKeyConfigTerm
	wireKeyConfigIndex
	wireKeyVoters
	wireKeyCommit
	wireKeyCandidacy
	wireKeyRound
	wireKeyElection
)

// wireKeyIndex returns the field index of a map key; a string switch
// neither allocates nor hashes.
func wireKeyIndex(key []byte) (int, bool) {
	switch string(key) {
	case "k":
		return wireKeyKind, true
	case "f":
		return wireKeyFrom, true
	case "t":
		return wireKeyTo, true
	case "tm":
		return wireKeyTerm, true
	case "e":
		return wireKeyEpoch, true
	case "r":
		return wireKeyReject, true
	case "l":
		return wireKeyLeader, true
	case "c":
		return wireKeyCandidate, true
	case "p":
		return wireKeyPhase, true
	case "h":
		return wireKeyHops, true
	case "d":
		return wireKeyDirection, true
	case "x":
		return wireKeyContext, true
	case "ct":
		return wireKeyConfigTerm, true
	case "ci":
		return wireKeyConfigIndex, true
	case "v":
		return wireKeyVoters, true
	case "cm":
		return wireKeyCommit, true
	case "cd":
		return wireKeyCandidacy, true
	case "rd":
		return wireKeyRound, true
	case "el":
		return wireKeyElection, true
	}
	return 0, false
}

// uintField returns the unsigned field at index idx, or nil for Reject,
// Voters and Election.
func (w *wireMessage) uintField(idx int) *uint64 {
	switch idx {
	case wireKeyKind:
		return &w.Kind
	case wireKeyFrom:
		return &w.From
	case wireKeyTo:
		return &w.To
	case wireKeyTerm:
		return &w.Term
	case wireKeyEpoch:
		return &w.Epoch
	case wireKeyLeader:
		return &w.Leader
	case wireKeyCandidate:
		return &w.Candidate
	case wireKeyPhase:
		return &w.Phase
	case wireKeyHops:
		return &w.Hops
	case wireKeyDirection:
		return &w.Direction
	case wireKeyContext:
		return &w.Context
	case wireKeyConfigTerm:
		return &w.ConfigTerm
	case wireKeyConfigIndex:
		return &w.ConfigIndex
	case wireKeyCommit:
		return &w.Commit
	case wireKeyCandidacy:
		return &w.Candidacy
	case wireKeyRound:
		return &w.Round
	}
	return nil
}

// appendWire appends w's map as msgpack/v5 encodes it: a map of the
// fields that are not zero (Kind always), in declaration order, keys as
// strings, integers in their smallest unsigned form.
func appendWire(dst []byte, w *wireMessage) []byte {
	n := 1
	for _, v := range [...]uint64{w.From, w.To, w.Term, w.Epoch, w.Leader, w.Candidate, w.Phase, w.Hops,
		w.Direction, w.Context, w.ConfigTerm, w.ConfigIndex, w.Commit, w.Candidacy, w.Round} {
		if v != 0 {
			n++
		}
	}
	if w.Reject {
		n++
	}
	if w.Voters != "" {
		n++
	}
	if w.Election != "" {
		n++
	}
	if n < 16 {
		dst = append(dst, 0x80|byte(n))
	} else {
		dst = binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	dst = appendUintField(appendStr(dst, "k"), w.Kind)
	dst = appendUintKey(dst, "f", w.From)
	dst = appendUintKey(dst, "t", w.To)
	dst = appendUintKey(dst, "tm", w.Term)
	dst = appendUintKey(dst, "e", w.Epoch)
	if w.Reject {
		dst = append(appendStr(dst, "r"), 0xc3)
	}
	dst = appendUintKey(dst, "l", w.Leader)
	dst = appendUintKey(dst, "c", w.Candidate)
	dst = appendUintKey(dst, "p", w.Phase)
	dst = appendUintKey(dst, "h", w.Hops)
	dst = appendUintKey(dst, "d", w.Direction)
	dst = appendUintKey(dst, "x", w.Context)
	dst = appendUintKey(dst, "ct", w.ConfigTerm)
	dst = appendUintKey(dst, "ci", w.ConfigIndex)
	if w.Voters != "" {
		dst = appendStr(appendStr(dst, "v"), w.Voters)
	}
	dst = appendUintKey(dst, "cm", w.Commit)
	dst = appendUintKey(dst, "cd", w.Candidacy)
	dst = appendUintKey(dst, "rd", w.Round)
	if w.Election != "" {
		dst = appendStr(appendStr(dst, "el"), w.Election)
	}
	return dst
}

// appendUintKey appends key and v unless v is zero (omitempty).
func appendUintKey(dst []byte, key string, v uint64) []byte {
	if v == 0 {
		return dst
	}
	return appendUintField(appendStr(dst, key), v)
}

func appendUintField(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= 0xff:
		return append(dst, 0xcc, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
	}
}

func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 256:
		dst = append(dst, 0xd9, byte(n))
	case n <= 0xffff:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}
