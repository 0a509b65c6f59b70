package keyring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Request is one step of a cluster-wide key operation, as an agent asks
// it of every other member through gossip (agent keys): list the keys, or
// install, use or remove Key. Sent is when it was asked, so that a
// recorded request replayed long after is refused.
type Request struct {
	Op   Op
	Key  []byte // nil for OpList
	Sent time.Time
}

// Op is what a Request asks.
type Op byte

// Ops of a Request. ONLY APPEND: the byte values are on the wire.
const (
	OpList Op = iota
	OpInstall
	OpUse
	OpRemove
)

func (o Op) String() string {
	switch o {
	case OpList:
		return "list"
	case OpInstall:
		return "install"
	case OpUse:
		return "use"
	case OpRemove:
		return "remove"
	}
	return fmt.Sprintf("op %d", byte(o))
}

// Answer is a member's answer to a Request: the keys it holds after the
// step, primary first (none on a member without a cluster key), and Err,
// the reason it refused the step, or "".
type Answer struct {
	Err  string
	Keys [][]byte
}

// WireVersion is the version of the Request and Answer encodings. A
// member reading another version refuses it by name rather than guess.
const WireVersion = 1

// Limits of the encodings, checked before anything is allocated.
const (
	// maxAnswerErr bounds an Answer's error text.
	maxAnswerErr = 512
	// requestLen is an encoded Request with no key.
	requestLen = 1 + 1 + 8 + 1
	// MaxAnswerLen bounds an encoded Answer: version, error text and
	// MaxKeys keys of 32 bytes with their lengths.
	MaxAnswerLen = 1 + binary.MaxVarintLen16 + maxAnswerErr + 1 + MaxKeys*(1+32)
)

// ErrWireVersion marks a Request or Answer of a version this agent does
// not read.
var ErrWireVersion = errors.New("keyring: unknown message version")

// errWire marks a malformed Request or Answer.
var errWire = errors.New("keyring: malformed message")

// AppendRequest appends r's encoding to b: version, op, Sent in Unix
// milliseconds (8 bytes, big endian), the key's length (one byte) and the
// key.
func AppendRequest(b []byte, r Request) ([]byte, error) {
	if err := checkRequest(r.Op, len(r.Key)); err != nil {
		return nil, err
	}
	b = append(b, WireVersion, byte(r.Op))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Sent.UnixMilli()))
	b = append(b, byte(len(r.Key)))
	return append(b, r.Key...), nil
}

func checkRequest(op Op, keyLen int) error {
	switch op {
	case OpList:
		if keyLen != 0 {
			return fmt.Errorf("%w: list carries a key", errWire)
		}
	case OpInstall, OpUse, OpRemove:
		if keyLen != 16 && keyLen != 24 && keyLen != 32 {
			return fmt.Errorf("%w: %v with a key of %d bytes, want 16, 24 or 32", errWire, op, keyLen)
		}
	default:
		return fmt.Errorf("%w: unknown %v", errWire, op)
	}
	return nil
}

// DecodeRequest parses a Request made by AppendRequest; anything else —
// another version, an unknown op, a bad key length, truncation, trailing
// bytes — is an error, ErrWireVersion for another version.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if len(b) == 0 {
		return r, fmt.Errorf("%w: empty", errWire)
	}
	if b[0] != WireVersion {
		return r, fmt.Errorf("%w: request version %d, this agent reads version %d: run the same conclave release on every member", ErrWireVersion, b[0], WireVersion)
	}
	if len(b) < requestLen {
		return r, fmt.Errorf("%w: request of %d bytes, too short", errWire, len(b))
	}
	r.Op = Op(b[1])
	ms := int64(binary.BigEndian.Uint64(b[2:10]))
	n := int(b[10])
	if err := checkRequest(r.Op, n); err != nil {
		return Request{}, err
	}
	if len(b) != requestLen+n {
		return Request{}, fmt.Errorf("%w: request of %d bytes, want %d", errWire, len(b), requestLen+n)
	}
	r.Sent = time.UnixMilli(ms)
	if n > 0 {
		r.Key = bytes.Clone(b[requestLen:])
	}
	return r, nil
}

// AppendAnswer appends a's encoding to b: version, the error text's
// length (uvarint) and text, the number of keys (one byte) and each key
// with its length (one byte). An error text beyond the limit is cut.
func AppendAnswer(b []byte, a Answer) ([]byte, error) {
	if len(a.Keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, at most %d", errWire, len(a.Keys), MaxKeys)
	}
	msg := a.Err
	if len(msg) > maxAnswerErr {
		msg = msg[:maxAnswerErr]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	b = append(b, WireVersion)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	b = append(b, msg...)
	b = append(b, byte(len(a.Keys)))
	for i, k := range a.Keys {
		if err := checkAnswerKey(a.Keys[:i], k); err != nil {
			return nil, err
		}
		b = append(b, byte(len(k)))
		b = append(b, k...)
	}
	return b, nil
}

func checkAnswerKey(before [][]byte, k []byte) error {
	switch len(k) {
	case 16, 24, 32:
	default:
		return fmt.Errorf("%w: key of %d bytes, want 16, 24 or 32", errWire, len(k))
	}
	for _, o := range before {
		if bytes.Equal(o, k) {
			return fmt.Errorf("%w: key %s listed twice", errWire, Fingerprint(k))
		}
	}
	return nil
}

// DecodeAnswer parses an Answer made by AppendAnswer; anything else is an
// error, ErrWireVersion for another version.
func DecodeAnswer(b []byte) (Answer, error) {
	var a Answer
	if len(b) == 0 {
		return a, fmt.Errorf("%w: empty", errWire)
	}
	if b[0] != WireVersion {
		return a, fmt.Errorf("%w: answer version %d, this agent reads version %d: run the same conclave release on every member", ErrWireVersion, b[0], WireVersion)
	}
	if len(b) > MaxAnswerLen {
		return a, fmt.Errorf("%w: answer of %d bytes, at most %d", errWire, len(b), MaxAnswerLen)
	}
	rest := b[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > maxAnswerErr || k != len(binary.AppendUvarint(nil, n)) || uint64(len(rest)-k) < n {
		return a, fmt.Errorf("%w: bad error text length", errWire)
	}
	rest = rest[k:]
	if !utf8.Valid(rest[:n]) {
		return a, fmt.Errorf("%w: error text is not UTF-8", errWire)
	}
	a.Err = string(rest[:n])
	rest = rest[n:]
	if len(rest) == 0 {
		return Answer{}, fmt.Errorf("%w: no key count", errWire)
	}
	count := int(rest[0])
	rest = rest[1:]
	if count > MaxKeys {
		return Answer{}, fmt.Errorf("%w: %d keys, at most %d", errWire, count, MaxKeys)
	}
	for range count {
		if len(rest) == 0 || int(rest[0]) > len(rest)-1 {
			return Answer{}, fmt.Errorf("%w: truncated key", errWire)
		}
		key := rest[1 : 1+int(rest[0])]
		if err := checkAnswerKey(a.Keys, key); err != nil {
			return Answer{}, err
		}
		a.Keys = append(a.Keys, bytes.Clone(key))
		rest = rest[1+len(key):]
	}
	if len(rest) != 0 {
		return Answer{}, fmt.Errorf("%w: %d trailing bytes", errWire, len(rest))
	}
	return a, nil
}
