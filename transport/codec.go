package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/conclave-agent/conclave/protocols"
)

// Frame layout: a 4-byte big-endian body length, then a msgpack map with the
// short keys of wireMessage. A map (rather than a positional array) lets a
// newer peer add a field that an older one skips; omitempty keeps the zero
// fields that most kinds leave unused off the wire.

// HeaderLen is the size of the length prefix in front of every frame body.
const HeaderLen = 4

// DefaultMaxMessageBytes is the body limit used when a caller passes zero.
// A real election message encodes to well under 100 bytes, so this leaves
// room for fields added later while keeping a hostile peer's cost small.
// It bounds a coalesced frame too: the sender starts another frame in the
// same write rather than pass its own limit, so peers that share
// max_message_bytes take every frame (50 elections' heartbeats are about
// 1.6 KB).
const DefaultMaxMessageBytes = 4096

// maxDepth caps msgpack nesting. Our own messages are one flat map (depth
// 1); the slack is only for unknown fields a newer peer might add.
const maxDepth = 8

// Decode errors. Every error ReadFrame and DecodeMessage return wraps exactly
// one of these (or io.EOF for a stream closed cleanly between frames), so a
// caller can log one line and count by Reason.
var (
	// ErrFrameTooLarge: the length prefix exceeds the configured maximum.
	// It is detected before the body is read or allocated.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTruncated: the stream ended inside a header or body.
	ErrTruncated = errors.New("truncated frame")
	// ErrMalformed: the body is not a well-formed message: bad msgpack,
	// a length or count larger than the bytes left, nesting too deep, a
	// field of the wrong type or a duplicate field.
	ErrMalformed = errors.New("malformed frame")
	// ErrTrailingBytes: the body holds bytes after the message.
	ErrTrailingBytes = errors.New("trailing bytes after message")
	// ErrUnknownKind: the message kind is not one this build knows.
	ErrUnknownKind = errors.New("unknown message kind")
	// ErrOutOfRange: a field does not fit its type (kind > 255, phase
	// > 2^32-1, an unknown direction); it is refused rather than wrapped.
	ErrOutOfRange = errors.New("field out of range")
)

// Reasons returned by Reason, used as counter labels.
const (
	ReasonTooLarge      = "too_large"
	ReasonTruncated     = "truncated"
	ReasonMalformed     = "malformed"
	ReasonTrailingBytes = "trailing_bytes"
	ReasonUnknownKind   = "unknown_kind"
	ReasonOutOfRange    = "out_of_range"
	ReasonOther         = "other"
)

// Reason maps a decode error to a short, stable label for counters and logs.
// Errors that are not decode errors (a network failure, say) are "other".
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrTruncated):
		return ReasonTruncated
	case errors.Is(err, ErrMalformed):
		return ReasonMalformed
	case errors.Is(err, ErrTrailingBytes):
		return ReasonTrailingBytes
	case errors.Is(err, ErrUnknownKind):
		return ReasonUnknownKind
	case errors.Is(err, ErrOutOfRange):
		return ReasonOutOfRange
	default:
		return ReasonOther
	}
}

// wireMessage is protocols.Message as it travels. Fields narrower than 64
// bits on the Go side are decoded as uint64 here and range-checked, because
// msgpack/v5 silently wraps (256 decodes into a uint8 as 0).
type wireMessage struct {
	Kind      uint64 `msgpack:"k"`
	From      uint64 `msgpack:"f,omitempty"`
	To        uint64 `msgpack:"t,omitempty"`
	Term      uint64 `msgpack:"tm,omitempty"`
	Epoch     uint64 `msgpack:"e,omitempty"`
	Reject    bool   `msgpack:"r,omitempty"`
	Leader    uint64 `msgpack:"l,omitempty"`
	Candidate uint64 `msgpack:"c,omitempty"`
	Phase     uint64 `msgpack:"p,omitempty"`
	Hops      uint64 `msgpack:"h,omitempty"`
	Direction uint64 `msgpack:"d,omitempty"`
	Context   uint64 `msgpack:"x,omitempty"`
	// The sender's voter configuration and the committed index (majority,
	// docs/voters.md). "v" is the one string field.
	ConfigTerm  uint64 `msgpack:"ct,omitempty"`
	ConfigIndex uint64 `msgpack:"ci,omitempty"`
	Voters      string `msgpack:"v,omitempty"`
	Commit      uint64 `msgpack:"cm,omitempty"`
	// The sender's candidacy (docs/health.md): priority in the low 8 bits,
	// bit 8 set when ineligible. Older peers skip the unknown key.
	Candidacy uint64 `msgpack:"cd,omitempty"`
	// The Peterson election round (ring). Older peers skip the unknown
	// key; they run no Peterson elections, so they never need it.
	Round uint64 `msgpack:"rd,omitempty"`
	// The election's name, only on /conclave/election/2 (batch.go) and
	// absent for the default election. An older peer would skip the
	// unknown key and take the message for its default election's, so a
	// v1 frame never carries it and a v1 reader refuses it.
	Election string `msgpack:"el,omitempty"`
}

func toWire(m protocols.Message) wireMessage {
	return wireMessage{
		Kind: uint64(m.Kind), From: uint64(m.From), To: uint64(m.To),
		Term: m.Term, Epoch: m.Epoch, Reject: m.Reject,
		Leader: uint64(m.Leader), Candidate: uint64(m.Candidate),
		Phase: uint64(m.Phase), Hops: uint64(m.Hops),
		Direction: uint64(m.Direction), Context: m.Context,
		ConfigTerm: m.ConfigTerm, ConfigIndex: m.ConfigIndex, Voters: m.Voters, Commit: m.Commit,
		Candidacy: uint64(m.Priority) | candidacyBit(m.Ineligible),
		Round:     m.Round, Election: m.Election,
	}
}

// wireIneligible is the candidacy field's ineligible bit.
const wireIneligible = 1 << 8

func candidacyBit(ineligible bool) uint64 {
	if ineligible {
		return wireIneligible
	}
	return 0
}

// fromWire range-checks w. names, if not nil, remembers the voter lists
// already found valid: every heartbeat carries one, and checking it
// allocates.
func fromWire(w wireMessage, names *stringCache) (protocols.Message, error) {
	if w.Kind > math.MaxUint8 {
		return protocols.Message{}, fmt.Errorf("%w: kind %d", ErrOutOfRange, w.Kind)
	}
	if w.Phase > math.MaxUint32 || w.Hops > math.MaxUint32 {
		return protocols.Message{}, fmt.Errorf("%w: phase %d hops %d", ErrOutOfRange, w.Phase, w.Hops)
	}
	if w.Direction > uint64(protocols.CounterClockwise) {
		return protocols.Message{}, fmt.Errorf("%w: direction %d", ErrOutOfRange, w.Direction)
	}
	if w.Candidacy > wireIneligible|math.MaxUint8 {
		return protocols.Message{}, fmt.Errorf("%w: candidacy %d", ErrOutOfRange, w.Candidacy)
	}
	k := protocols.MessageKind(w.Kind)
	if !k.Valid() {
		return protocols.Message{}, fmt.Errorf("%w: %d", ErrUnknownKind, w.Kind)
	}
	if c := (protocols.Configuration{Term: w.ConfigTerm, Index: w.ConfigIndex, Voters: w.Voters}); c.Voters != "" && !names.valid(c.Voters) {
		// Check reads only the voter list once it is not empty.
		if err := c.Check(); err != nil {
			return protocols.Message{}, fmt.Errorf("%w: voters: %v", ErrOutOfRange, err)
		}
		names.setValid(c.Voters)
	}
	return protocols.Message{
		Kind: k, From: protocols.ID(w.From), To: protocols.ID(w.To),
		Term: w.Term, Epoch: w.Epoch, Reject: w.Reject,
		Leader: protocols.ID(w.Leader), Candidate: protocols.ID(w.Candidate),
		Phase: uint32(w.Phase), Hops: uint32(w.Hops),
		Direction: protocols.Direction(w.Direction), Context: w.Context,
		ConfigTerm: w.ConfigTerm, ConfigIndex: w.ConfigIndex, Voters: w.Voters, Commit: w.Commit,
		Ineligible: w.Candidacy&wireIneligible != 0, Priority: uint8(w.Candidacy),
		Round: w.Round, Election: w.Election,
	}, nil
}

// checkEncodable refuses what a receiver would refuse, so that every body
// an encoder produces decodes back to its message. named says whether the
// protocol carries election names (v2).
func checkEncodable(m protocols.Message, named bool) error {
	if !m.Kind.Valid() {
		return fmt.Errorf("transport: encode: %w: %d", ErrUnknownKind, uint8(m.Kind))
	}
	if m.Direction > protocols.CounterClockwise {
		return fmt.Errorf("transport: encode: %w: direction %d", ErrOutOfRange, m.Direction)
	}
	if m.Election == "" {
		return nil
	}
	if !named {
		return fmt.Errorf("transport: encode: %w: election %q: a named election's messages travel only on %s; send them to a peer that speaks it",
			ErrOutOfRange, m.Election, BatchProtocolID)
	}
	if err := CheckElectionName(m.Election); err != nil {
		return fmt.Errorf("transport: encode: %w", err)
	}
	return nil
}

// EncodeMessage returns the msgpack body of m as /conclave/election/1
// carries it, without the length prefix. It refuses what a receiver would
// refuse (an invalid kind or direction), and a message of a named election,
// which only /conclave/election/2 carries (EncodeBatch), so that every body
// it produces decodes back to m.
func EncodeMessage(m protocols.Message) ([]byte, error) {
	if err := checkEncodable(m, false); err != nil {
		return nil, err
	}
	w := toWire(m)
	return appendWire(nil, &w), nil
}

// AppendFrame appends the frame of m (length prefix and body) to dst.
func AppendFrame(dst []byte, m protocols.Message) ([]byte, error) {
	body, err := EncodeMessage(m)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...), nil
}

// EncodeFrame returns the frame of m: length prefix and body.
func EncodeFrame(m protocols.Message) ([]byte, error) {
	return AppendFrame(nil, m)
}

// DecodeMessage decodes one v1 frame body. It checks the bytes as it
// reads them (decodeMap): every declared length and count must fit in the
// bytes left, nesting is capped, known fields must have their type and no
// bytes may follow the message.
func DecodeMessage(body []byte) (protocols.Message, error) {
	var w wireMessage
	if err := decodeBody(body, &w); err != nil {
		return protocols.Message{}, err
	}
	return fromWire(w, nil)
}

// ReadFrame reads one frame from r and decodes it. The length prefix is
// checked against maxBytes (DefaultMaxMessageBytes when maxBytes <= 0)
// before anything is allocated for the body. A stream that ends cleanly
// before a header returns io.EOF unwrapped; every other error wraps one of
// the Err* sentinels above or is the reader's own error.
func ReadFrame(r io.Reader, maxBytes int) (protocols.Message, error) {
	var fr frameReader
	return fr.read(r, maxBytes)
}

// frameReader reuses one body buffer across the frames of a stream; the
// buffer never grows beyond the maximum frame size.
type frameReader struct {
	hdr [HeaderLen]byte
	buf []byte
}

func (fr *frameReader) read(r io.Reader, maxBytes int) (protocols.Message, error) {
	body, err := fr.readBody(r, maxBytes)
	if err != nil {
		return protocols.Message{}, err
	}
	return DecodeMessage(body)
}

// readBody reads one frame's body into fr's buffer, which the next call
// reuses. Errors are those of ReadFrame.
func (fr *frameReader) readBody(r io.Reader, maxBytes int) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	if _, err := io.ReadFull(r, fr.hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: header: %v", ErrTruncated, err)
		}
		return nil, fmt.Errorf("transport: read header: %w", err)
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if uint64(n) > uint64(maxBytes) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, maxBytes)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrMalformed)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	body := fr.buf[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return nil, fmt.Errorf("%w: body of %d bytes: %v", ErrTruncated, n, err)
		}
		return nil, fmt.Errorf("transport: read body: %w", err)
	}
	return body, nil
}

// decodeBody decodes a v1 message body: one message map (decodeMap) and
// nothing after it.
func decodeBody(b []byte, out *wireMessage) error {
	w := walker{b: b}
	if err := decodeMap(&w, false, out, nil); err != nil {
		return err
	}
	if w.off != len(b) {
		return fmt.Errorf("%w: %d of %d bytes", ErrTrailingBytes, len(b)-w.off, len(b))
	}
	return nil
}

// decodeMap reads one message map from w's cursor into out, which the
// caller zeroes. It checks as it goes, before anything is allocated: a
// map with string keys; known keys carry an unsigned integer (a boolean
// for "r", a string for "v" and "el") and appear at most once; unknown keys
// may carry any value except extensions, within the depth cap, and are
// skipped. named says whether the protocol carries election names: on v1
// the "el" key is refused, never skipped, so that no named election's
// message is ever taken for the default election's. names, if not nil,
// interns the strings of a stream's frames.
//
// It decodes exactly what msgpack/v5 would decode into wireMessage from
// the bytes it accepts (TestDecodeMatchesMsgpack), without reflection: a
// coalesced frame carries every election's heartbeat, so this is paid per
// message per election.
func decodeMap(w *walker, named bool, out *wireMessage, names *stringCache) error {
	n, err := w.mapLen()
	if err != nil {
		return err
	}
	var seen uint32
	for range n {
		key, err := w.str()
		if err != nil {
			return err
		}
		idx, known := wireKeyIndex(key)
		if !known {
			if err := w.skip(1); err != nil {
				return err
			}
			continue
		}
		if seen&(1<<idx) != 0 {
			return fmt.Errorf("%w: duplicate field %q", ErrMalformed, key)
		}
		seen |= 1 << idx
		switch idx {
		case wireKeyReject:
			out.Reject, err = w.boolean()
		case wireKeyVoters:
			var s []byte
			if s, err = w.strValue(); err == nil {
				if len(s) > protocols.MaxVotersLen {
					err = fmt.Errorf("%w: %d bytes, at most %d", ErrOutOfRange, len(s), protocols.MaxVotersLen)
				} else {
					out.Voters = names.get(s)
				}
			}
		case wireKeyElection:
			if !named {
				err = fmt.Errorf("%w: an election name on %s, which carries only the default election", ErrMalformed, ProtocolID)
				break
			}
			var s []byte
			if s, err = w.strValue(); err == nil {
				if len(s) == 0 {
					err = fmt.Errorf("%w: empty election name (the default election omits the key)", ErrOutOfRange)
				} else if err = checkElectionName(s); err == nil {
					out.Election = names.get(s)
				}
			}
		default:
			var v uint64
			if v, err = w.unsigned(); err == nil {
				if f := out.uintField(idx); f != nil {
					*f = v
				} else {
					// Not reached: every other key has its case above.
					err = fmt.Errorf("%w: no unsigned field %q", ErrMalformed, key)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	return nil
}

// stringCache hands out one string per distinct value, so that a
// stream's frames (every heartbeat names its election, and many carry the
// same voters) do not allocate a string per message, and remembers which
// of them are valid voter lists. It holds at most stringCacheBytes of a
// peer's strings; past that it allocates and checks every time.
type stringCache struct {
	m     map[string]string
	ok    map[string]bool // voter lists found valid, among m's strings
	bytes int
}

// valid reports whether s was found a valid voter list before.
func (c *stringCache) valid(s string) bool { return c != nil && c.ok[s] }

// setValid remembers that s is a valid voter list, if s is cached.
func (c *stringCache) setValid(s string) {
	if c == nil {
		return
	}
	if _, cached := c.m[s]; !cached {
		return
	}
	if c.ok == nil {
		c.ok = map[string]bool{}
	}
	c.ok[s] = true
}

const stringCacheBytes = 4096

// get returns b as a string; a nil cache only converts.
func (c *stringCache) get(b []byte) string {
	if c == nil {
		return string(b)
	}
	if s, ok := c.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if c.bytes+len(s) <= stringCacheBytes {
		if c.m == nil {
			c.m = map[string]string{}
		}
		c.m[s] = s
		c.bytes += len(s)
	}
	return s
}

// walker is a cursor over msgpack bytes that only ever advances and
// checks every length against what is left before trusting it.
type walker struct {
	b   []byte
	off int
}

func (w *walker) left() int { return len(w.b) - w.off }

func (w *walker) code() (byte, error) {
	if w.off >= len(w.b) {
		return 0, fmt.Errorf("%w: unexpected end at byte %d", ErrMalformed, w.off)
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

// take advances over n bytes, failing if fewer are left. n is a uint64 so
// a 32-bit declared length can never wrap a signed int.
func (w *walker) take(n uint64) ([]byte, error) {
	if n > uint64(w.left()) {
		return nil, fmt.Errorf("%w: length %d exceeds the %d bytes left", ErrMalformed, n, w.left())
	}
	s := w.b[w.off : w.off+int(n)]
	w.off += int(n)
	return s, nil
}

func (w *walker) uintN(size int) (uint64, error) {
	s, err := w.take(uint64(size))
	if err != nil {
		return 0, err
	}
	switch size {
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(s)), nil
	default:
		return binary.BigEndian.Uint64(s), nil
	}
}

func (w *walker) mapLen() (uint64, error) {
	c, err := w.code()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c >= 0x80 && c <= 0x8f:
		n = uint64(c & 0x0f)
	case c == 0xde:
		n, err = w.uintN(2)
	case c == 0xdf:
		n, err = w.uintN(4)
	default:
		return 0, fmt.Errorf("%w: message is not a map (code 0x%02x)", ErrMalformed, c)
	}
	if err != nil {
		return 0, err
	}
	// Each entry needs at least a key byte and a value byte.
	if n > uint64(w.left())/2 {
		return 0, fmt.Errorf("%w: map of %d entries in %d bytes", ErrMalformed, n, w.left())
	}
	return n, nil
}

func (w *walker) str() ([]byte, error) {
	c, err := w.code()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, err = w.uintN(1)
	case c == 0xda:
		n, err = w.uintN(2)
	case c == 0xdb:
		n, err = w.uintN(4)
	default:
		return nil, fmt.Errorf("%w: key is not a string (code 0x%02x)", ErrMalformed, c)
	}
	if err != nil {
		return nil, err
	}
	return w.take(n)
}

// strValue reads a string value (str() reads keys: the same encoding).
func (w *walker) strValue() ([]byte, error) {
	s, err := w.str()
	if err != nil {
		return nil, fmt.Errorf("%w: want a string", err)
	}
	return s, nil
}

// unsigned reads an unsigned integer: a positive fixint or uint8..uint64.
// Signed encodings are refused even when positive, as before: our
// encoders never write them.
func (w *walker) unsigned() (uint64, error) {
	c, err := w.code()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return uint64(c), nil
	case c == 0xcc:
		return w.uintN(1)
	case c == 0xcd:
		return w.uintN(2)
	case c == 0xce:
		return w.uintN(4)
	case c == 0xcf:
		return w.uintN(8)
	default:
		return 0, fmt.Errorf("%w: want an unsigned integer, got code 0x%02x", ErrMalformed, c)
	}
}

func (w *walker) boolean() (bool, error) {
	c, err := w.code()
	if err != nil {
		return false, err
	}
	if c != 0xc2 && c != 0xc3 {
		return false, fmt.Errorf("%w: want a boolean, got code 0x%02x", ErrMalformed, c)
	}
	return c == 0xc3, nil
}

// skip advances over one value of any type, recursing into containers at
// most maxDepth deep. Each element consumes at least one byte, so the walk
// is linear in the body size whatever the declared counts.
func (w *walker) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nesting deeper than %d", ErrMalformed, maxDepth)
	}
	c, err := w.code()
	if err != nil {
		return err
	}
	var count uint64 // container elements to skip
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return nil
	case c >= 0x80 && c <= 0x8f:
		count = 2 * uint64(c&0x0f)
	case c >= 0x90 && c <= 0x9f:
		count = uint64(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf:
		_, err = w.take(uint64(c & 0x1f))
		return err
	case c == 0xcc || c == 0xd0:
		_, err = w.take(1)
		return err
	case c == 0xcd || c == 0xd1:
		_, err = w.take(2)
		return err
	case c == 0xce || c == 0xd2 || c == 0xca:
		_, err = w.take(4)
		return err
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		_, err = w.take(8)
		return err
	case c == 0xc4 || c == 0xd9: // bin8, str8
		return w.skipSized(1)
	case c == 0xc5 || c == 0xda: // bin16, str16
		return w.skipSized(2)
	case c == 0xc6 || c == 0xdb: // bin32, str32
		return w.skipSized(4)
	case c == 0xdc:
		count, err = w.uintN(2)
	case c == 0xdd:
		count, err = w.uintN(4)
	case c == 0xde:
		count, err = w.uintN(2)
		count *= 2
	case c == 0xdf:
		count, err = w.uintN(4)
		count *= 2
	default:
		// 0xc1 (never used) and every extension type: we send none, and
		// the decoder would look up extension types we do not register.
		return fmt.Errorf("%w: unsupported code 0x%02x", ErrMalformed, c)
	}
	if err != nil {
		return err
	}
	if count > uint64(w.left()) {
		return fmt.Errorf("%w: container of %d elements in %d bytes", ErrMalformed, count, w.left())
	}
	for range count {
		if err := w.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) skipSized(size int) error {
	n, err := w.uintN(size)
	if err != nil {
		return err
	}
	_, err = w.take(n)
	return err
}
