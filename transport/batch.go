package transport

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/protocols"
)

// Coalesced frames, /conclave/election/2. An agent that runs several
// elections sends each peer, per loop iteration, one write of one frame
// holding every election's messages to it, as CockroachDB coalesces its
// ranges' heartbeats: the frames and system calls per heartbeat per peer
// stay the same however many elections run.
//
// Frame layout: the same 4-byte big-endian body length as v1, then a
// msgpack array of 1..MaxBatch message maps. Each map is exactly a v1
// body (wireMessage) plus, for a named election, the key "el" with its
// name; the default election's messages omit it, so its maps are byte for
// byte what v1 carries.

// BatchProtocolID is the libp2p stream protocol of coalesced frames. A
// sender proposes it before ProtocolID; a peer that knows only ProtocolID
// (releases up to v0.1.0) gets v1 frames of the default election's
// messages, and never a named election's (Stats.Dropped counts them as
// DropUnsupported), because its decoder would skip the unknown "el" key and
// take the message for its default election's.
const BatchProtocolID = "/conclave/election/2"

// MaxBatch bounds the messages in one /conclave/election/2 frame: a
// message to each of 256 elections, far more than an agent runs, yet a
// hostile frame's count is refused from its header before anything is
// decoded. A sender with more starts another frame in the same write.
const MaxBatch = 256

// MaxElectionName bounds an election's name in bytes.
const MaxElectionName = 32

// defaultElection is the name the default election must never travel as:
// it has no name on the wire.
const defaultElection = "default"

// CheckElectionName reports whether name may travel as a named election's
// name: 1 to MaxElectionName bytes of a–z, 0–9, '_' and '-', and not
// "default", which is the unnamed election ("" on a Message, no key on the
// wire), so that one election never has two spellings. Errors wrap
// ErrOutOfRange.
func CheckElectionName(name string) error { return checkElectionName(name) }

func checkElectionName[T string | []byte](name T) error {
	switch {
	case len(name) == 0:
		return fmt.Errorf("%w: empty election name", ErrOutOfRange)
	case len(name) > MaxElectionName:
		return fmt.Errorf("%w: election name of %d bytes, at most %d", ErrOutOfRange, len(name), MaxElectionName)
	case string(name) == defaultElection:
		return fmt.Errorf("%w: election name %q: the default election travels without a name", ErrOutOfRange, defaultElection)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return fmt.Errorf("%w: election name %q: byte %d is not one of a-z 0-9 _ -", ErrOutOfRange, string(name), i)
		}
	}
	return nil
}

// mapEncoder encodes message maps into one reused buffer.
type mapEncoder struct{ buf []byte }

func newMapEncoder() *mapEncoder { return &mapEncoder{} }

// encode returns m's map as v2 carries it, valid until the next call.
func (e *mapEncoder) encode(m protocols.Message) ([]byte, error) {
	if err := checkEncodable(m, true); err != nil {
		return nil, err
	}
	w := toWire(m)
	e.buf = appendWire(e.buf[:0], &w)
	return e.buf, nil
}

// arrayHeaderLen is the size of a msgpack array header for n elements.
func arrayHeaderLen(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= 0xffff:
		return 3
	default:
		return 5
	}
}

func appendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
	}
}

// EncodeBatch returns the body of one /conclave/election/2 frame carrying
// msgs, without the length prefix. It refuses an empty batch, more than
// MaxBatch messages and any message a receiver would refuse, so that every
// body it produces decodes back to msgs.
func EncodeBatch(msgs []protocols.Message) ([]byte, error) {
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return nil, fmt.Errorf("transport: encode batch: %w: %d messages, want 1 to %d", ErrOutOfRange, len(msgs), MaxBatch)
	}
	e := newMapEncoder()
	body := appendArrayHeader(nil, len(msgs))
	for _, m := range msgs {
		b, err := e.encode(m)
		if err != nil {
			return nil, err
		}
		body = append(body, b...)
	}
	return body, nil
}

// AppendBatchFrame appends the /conclave/election/2 frame of msgs (length
// prefix and body) to dst.
func AppendBatchFrame(dst []byte, msgs []protocols.Message) ([]byte, error) {
	body, err := EncodeBatch(msgs)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...), nil
}

// framePacker packs encoded message maps into /conclave/election/2
// frames, each body at most max bytes and MaxBatch messages, so that a
// receiver with the same max_message_bytes takes every frame. A map too
// large to share a frame goes alone, and a receiver refuses it as it
// would refuse that message on v1.
type framePacker struct {
	max    int
	out    []byte // complete frames
	cur    []byte // the maps of the open frame
	n      int    // messages in the open frame
	frames int    // frames in out
}

func (p *framePacker) reset(max int) {
	p.max, p.out, p.cur, p.n, p.frames = max, p.out[:0], p.cur[:0], 0, 0
}

func (p *framePacker) add(m []byte) {
	if p.n > 0 && (p.n == MaxBatch || arrayHeaderLen(p.n+1)+len(p.cur)+len(m) > p.max) {
		p.flush()
	}
	p.cur = append(p.cur, m...)
	p.n++
}

// flush closes the open frame, if any.
func (p *framePacker) flush() {
	if p.n == 0 {
		return
	}
	p.out = binary.BigEndian.AppendUint32(p.out, uint32(arrayHeaderLen(p.n)+len(p.cur)))
	p.out = appendArrayHeader(p.out, p.n)
	p.out = append(p.out, p.cur...)
	p.cur, p.n = p.cur[:0], 0
	p.frames++
}

// DecodeBatch decodes one /conclave/election/2 frame body. As DecodeMessage
// does for v1, it checks the bytes as it reads them: an array of
// 1..MaxBatch elements whose count fits in the bytes left, each a message
// map with known fields of their type and a valid election name, nothing
// after the array. One bad message refuses the whole frame. Every error
// wraps one of the Err* sentinels.
func DecodeBatch(body []byte) ([]protocols.Message, error) {
	var d batchDecoder
	return d.decode(nil, body)
}

// ReadBatchFrame reads one /conclave/election/2 frame from r and decodes
// it, with ReadFrame's bounds and errors.
func ReadBatchFrame(r io.Reader, maxBytes int) ([]protocols.Message, error) {
	var fr frameReader
	body, err := fr.readBody(r, maxBytes)
	if err != nil {
		return nil, err
	}
	return DecodeBatch(body)
}

// batchDecoder decodes the frames of one stream, interning their strings.
type batchDecoder struct {
	names stringCache
}

// decode appends body's messages to dst[:0]. It checks as it reads
// (decodeMap), and on error it returns dst[:0]: nothing of the frame is to
// be used.
func (d *batchDecoder) decode(dst []protocols.Message, body []byte) ([]protocols.Message, error) {
	dst = dst[:0]
	w := walker{b: body}
	n, err := w.arrayLen()
	if err != nil {
		return dst, err
	}
	if n == 0 {
		return dst, fmt.Errorf("%w: a frame of no messages", ErrMalformed)
	}
	if n > MaxBatch {
		return dst, fmt.Errorf("%w: a frame of %d messages, at most %d", ErrOutOfRange, n, MaxBatch)
	}
	for i := range int(n) {
		var wm wireMessage
		if err := decodeMap(&w, true, &wm, &d.names); err != nil {
			return dst[:0], fmt.Errorf("message %d: %w", i, err)
		}
		m, err := fromWire(wm, &d.names)
		if err != nil {
			return dst[:0], fmt.Errorf("message %d: %w", i, err)
		}
		dst = append(dst, m)
	}
	if w.off != len(body) {
		return dst[:0], fmt.Errorf("%w: %d of %d bytes", ErrTrailingBytes, len(body)-w.off, len(body))
	}
	return dst, nil
}

// arrayLen reads an array header whose count fits in the bytes left (each
// element takes at least one).
func (w *walker) arrayLen() (uint64, error) {
	c, err := w.code()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c >= 0x90 && c <= 0x9f:
		n = uint64(c & 0x0f)
	case c == 0xdc:
		n, err = w.uintN(2)
	case c == 0xdd:
		n, err = w.uintN(4)
	default:
		return 0, fmt.Errorf("%w: frame is not an array of messages (code 0x%02x)", ErrMalformed, c)
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(w.left()) {
		return 0, fmt.Errorf("%w: array of %d messages in %d bytes", ErrMalformed, n, w.left())
	}
	return n, nil
}
