package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/conclave-agent/conclave/protocols"
)

// batchOf returns the v2 body of the given message maps (v1 bodies, or
// hand-made maps).
func batchOf(maps ...[]byte) []byte {
	return cat(appendArrayHeader(nil, len(maps)), cat(maps...))
}

// namedBody is heartbeatBody with "el": name appended.
func namedBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := newMapEncoder().encode(protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 3, Context: 9, Election: name})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

// elMap is the map {"k": heartbeat, "el": <value bytes>}.
func elMap(value []byte) []byte {
	return cat([]byte{0x82, 0xa1, 'k', byte(protocols.MsgHeartbeat), 0xa2, 'e', 'l'}, value)
}

// str encodes s as a msgpack fixstr or str8.
func str(s string) []byte {
	if len(s) < 32 {
		return append([]byte{0xa0 | byte(len(s))}, s...)
	}
	return append([]byte{0xd9, byte(len(s))}, s...)
}

// hostileBatches are the v2 traps: the array's own header and count, and
// the election name, on top of every v1 body trap inside an array.
func hostileBatches(t testing.TB) []bodyCase {
	hb := heartbeatBody(t)
	named := namedBody(t, "db-primary")
	out := []bodyCase{
		{"one_default", batchOf(hb), nil},
		{"one_named", batchOf(named), nil},
		{"mixed", batchOf(hb, named, namedBody(t, "a"), hb), nil},
		{"array16_of_two", cat([]byte{0xdc, 0, 2}, hb, named), nil},
		{"max_batch", batchOf(repeatSlices(hb, MaxBatch)...), nil},
		{"max_batch_plus_one", batchOf(repeatSlices(hb, MaxBatch+1)...), ErrOutOfRange},
		{"empty_array", []byte{0x90}, ErrMalformed},
		{"array16_empty", []byte{0xdc, 0, 0}, ErrMalformed},
		{"array32_4G", cat([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, hb), ErrMalformed},
		{"array16_64K_short", cat([]byte{0xdc, 0xff, 0xff}, hb), ErrMalformed},
		{"array_count_beyond_bytes", cat([]byte{0x93}, hb), ErrMalformed},
		{"cut_array_header", []byte{0xdc, 0x01}, ErrMalformed},
		{"v1_body_on_v2", hb, ErrMalformed},
		{"nil_body", []byte{0xc0}, ErrMalformed},
		{"empty_body", []byte{}, ErrMalformed},
		{"element_not_a_map", []byte{0x91, 0x05}, ErrMalformed},
		{"nested_array", batchOf(batchOf(hb)), ErrMalformed},
		{"trailing_garbage", cat(batchOf(hb), []byte{0xc0}), ErrTrailingBytes},
		{"trailing_batch", cat(batchOf(hb), batchOf(hb)), ErrTrailingBytes},
		{"bad_second_message", batchOf(hb, []byte{0x81, 0xa1, 'k', 0xcc, 200}), ErrUnknownKind},
		{"el_empty", batchOf(elMap(str(""))), ErrOutOfRange},
		{"el_default", batchOf(elMap(str("default"))), ErrOutOfRange},
		{"el_upper", batchOf(elMap(str("DB"))), ErrOutOfRange},
		{"el_space", batchOf(elMap(str("a b"))), ErrOutOfRange},
		{"el_dot", batchOf(elMap(str("a.b"))), ErrOutOfRange},
		{"el_nul", batchOf(elMap(str("a\x00"))), ErrOutOfRange},
		{"el_utf8", batchOf(elMap(str("é"))), ErrOutOfRange},
		{"el_32", batchOf(elMap(str(strings.Repeat("a", 32)))), nil},
		{"el_33", batchOf(elMap(str(strings.Repeat("a", 33)))), ErrOutOfRange},
		{"el_str32_4GiB", batchOf(elMap([]byte{0xdb, 0xff, 0xff, 0xff, 0xff})), ErrMalformed},
		{"el_int", batchOf(elMap([]byte{0x07})), ErrMalformed},
		{"el_nil", batchOf(elMap([]byte{0xc0})), ErrMalformed},
		{"el_bin", batchOf(elMap([]byte{0xc4, 0x01, 'a'})), ErrMalformed},
		{"el_twice", batchOf(cat([]byte{0x83, 0xa1, 'k', 0x05, 0xa2, 'e', 'l'}, str("a"), []byte{0xa2, 'e', 'l'}, str("b"))), ErrMalformed},
	}
	// Every v1 trap, as the one message of a batch, is refused for the
	// same reason (or accepted, when v1 accepts it).
	for _, c := range hostileBodies(t) {
		if len(c.body) == 0 {
			continue
		}
		out = append(out, bodyCase{"v1_" + c.name, batchOf(c.body), c.want})
	}
	return out
}

func repeatSlices(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestDecodeBatchHostile(t *testing.T) {
	for _, c := range hostileBatches(t) {
		t.Run(c.name, func(t *testing.T) {
			ms, err := DecodeBatch(c.body)
			if c.want == nil {
				if err != nil {
					t.Fatalf("DecodeBatch: %v", err)
				}
				if len(ms) == 0 || len(ms) > MaxBatch {
					t.Fatalf("decoded %d messages", len(ms))
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("DecodeBatch = %v, %v; want %v", ms, err, c.want)
			}
			if Reason(err) == ReasonOther {
				t.Fatalf("error %v has no reason", err)
			}
		})
	}
}

// TestV1RefusesElectionName: a v1 body carrying "el" is refused, never
// taken for the default election's message; and the v1 encoder refuses a
// named election's message instead of dropping its name.
func TestV1RefusesElectionName(t *testing.T) {
	if _, err := DecodeMessage(namedBody(t, "db")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("v1 body with \"el\": err %v, want ErrMalformed", err)
	}
	m := protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Election: "db"}
	if b, err := EncodeFrame(m); err == nil {
		t.Fatalf("EncodeFrame of a named election's message = %x, want an error", b)
	}
	// The default election's body is the same on both protocols.
	m.Election = ""
	v1, err := EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := EncodeBatch([]protocols.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v2, batchOf(v1)) {
		t.Fatalf("v2 body %x, want the v1 body in an array %x", v2, batchOf(v1))
	}
}

func TestCheckElectionName(t *testing.T) {
	for _, ok := range []string{"a", "db-primary", "queue_7", "0", strings.Repeat("z", MaxElectionName), "defaults", "-"} {
		if err := CheckElectionName(ok); err != nil {
			t.Errorf("CheckElectionName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "default", "Default", "a b", "a/b", "ä", "a\n", strings.Repeat("z", MaxElectionName+1)} {
		if err := CheckElectionName(bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("CheckElectionName(%q) = %v, want ErrOutOfRange", bad, err)
		}
	}
}

func TestEncodeBatchRefuses(t *testing.T) {
	hb := protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2}
	cases := map[string][]protocols.Message{
		"empty":         nil,
		"too_many":      slicesRepeat(hb, MaxBatch+1),
		"invalid_kind":  {hb, {Kind: protocols.MsgInvalid}},
		"bad_direction": {{Kind: protocols.MsgRingElect, Direction: 2}},
		"bad_name":      {{Kind: protocols.MsgHeartbeat, Election: "default"}},
	}
	for name, msgs := range cases {
		if b, err := EncodeBatch(msgs); err == nil {
			t.Errorf("%s: EncodeBatch = %x, want an error", name, b)
		}
	}
}

func slicesRepeat(m protocols.Message, n int) []protocols.Message {
	out := make([]protocols.Message, n)
	for i := range out {
		out[i] = m
	}
	return out
}

var electionNames = []string{"", "", "a", "db-primary", "queue_7", strings.Repeat("x", MaxElectionName)}

// TestBatchRoundTripProperty: every field of every message, and its
// election, survives encode → frame → decode, for random batches.
func TestBatchRoundTripProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x626174636866))
	for range 300 {
		msgs := make([]protocols.Message, 1+r.IntN(MaxBatch))
		for i := range msgs {
			msgs[i] = randomMessage(r)
			msgs[i].Election = electionNames[r.IntN(len(electionNames))]
		}
		f, err := AppendBatchFrame(nil, msgs)
		if err != nil {
			t.Fatalf("AppendBatchFrame: %v", err)
		}
		got, err := ReadBatchFrame(bytes.NewReader(f), 1<<20)
		if err != nil {
			t.Fatalf("ReadBatchFrame: %v", err)
		}
		if len(got) != len(msgs) {
			t.Fatalf("%d messages back, want %d", len(got), len(msgs))
		}
		for i := range msgs {
			if got[i] != msgs[i] {
				t.Fatalf("message %d: got %v, want %v", i, got[i], msgs[i])
			}
		}
	}
}

// TestFramePackerBounds: the sender's packer keeps every frame within the
// body limit and MaxBatch, keeps order, and fills frames: it starts a new
// one only when the next message would not fit.
func TestFramePackerBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	enc := newMapEncoder()
	mapLen := func(m protocols.Message) int {
		b, err := enc.encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	for _, limit := range []int{256, 1000, DefaultMaxMessageBytes, 1 << 20} {
		for _, n := range []int{1, 15, 16, 50, MaxBatch, MaxBatch + 1, 3*MaxBatch + 7} {
			msgs := make([]protocols.Message, n)
			var pk framePacker
			pk.reset(limit)
			for i := range msgs {
				msgs[i] = protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: r.Uint64(), Context: uint64(i),
					Election: electionNames[r.IntN(len(electionNames))]}
				b, err := enc.encode(msgs[i])
				if err != nil {
					t.Fatal(err)
				}
				pk.add(b)
			}
			pk.flush()
			rd := bytes.NewReader(pk.out)
			var frames [][]protocols.Message
			var sizes []int
			var fr frameReader
			for rd.Len() > 0 {
				body, err := fr.readBody(rd, limit)
				if err != nil {
					t.Fatalf("limit %d, n %d, frame %d: %v", limit, n, len(frames), err)
				}
				ms, err := DecodeBatch(body)
				if err != nil {
					t.Fatalf("limit %d, n %d, frame %d: %v", limit, n, len(frames), err)
				}
				frames = append(frames, ms)
				sizes = append(sizes, len(body))
			}
			if len(frames) != pk.frames {
				t.Fatalf("limit %d, n %d: read %d frames, packer counted %d", limit, n, len(frames), pk.frames)
			}
			var got []protocols.Message
			for i, ms := range frames {
				got = append(got, ms...)
				if i+1 == len(frames) || len(ms) == MaxBatch {
					continue
				}
				maps := sizes[i] - arrayHeaderLen(len(ms))
				if arrayHeaderLen(len(ms)+1)+maps+mapLen(frames[i+1][0]) <= limit {
					t.Fatalf("limit %d, n %d: frame %d (%d messages, %d bytes) had room for the next message", limit, n, i, len(ms), sizes[i])
				}
			}
			if len(got) != len(msgs) {
				t.Fatalf("limit %d, n %d: %d messages back", limit, n, len(got))
			}
			for i := range msgs {
				if got[i] != msgs[i] {
					t.Fatalf("limit %d, n %d: message %d is %v, want %v", limit, n, i, got[i], msgs[i])
				}
			}
		}
	}
}

// TestBatchFromMsgpack: a batch written by a general msgpack encoder (as
// another implementation would) decodes; the format is plain msgpack.
func TestBatchFromMsgpack(t *testing.T) {
	body, err := msgpack.Marshal([]map[string]any{
		{"k": uint8(protocols.MsgHeartbeat), "f": uint8(1), "t": uint8(2), "el": "db"},
		{"k": uint8(protocols.MsgHeartbeat), "f": uint8(1), "t": uint8(2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := DecodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Election != "db" || ms[1].Election != "" {
		t.Fatalf("decoded %v", ms)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, c := range hostileBatches(f) {
		f.Add(c.body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, err := DecodeBatch(body)
		if err != nil {
			if Reason(err) == ReasonOther {
				t.Fatalf("error without a reason: %v", err)
			}
			if len(ms) != 0 {
				t.Fatalf("error %v with %d messages", err, len(ms))
			}
			return
		}
		if len(ms) == 0 || len(ms) > MaxBatch {
			t.Fatalf("accepted a batch of %d", len(ms))
		}
		for _, m := range batchMaps(body) {
			checkDecodeMatches(t, m, true)
		}
		// What was accepted re-encodes and decodes to the same messages.
		again, err := EncodeBatch(ms)
		if err != nil {
			t.Fatalf("re-encode %v: %v", ms, err)
		}
		ms2, err := DecodeBatch(again)
		if err != nil || len(ms2) != len(ms) {
			t.Fatalf("re-decode: %v, %v", ms2, err)
		}
		for i := range ms {
			if ms[i] != ms2[i] {
				t.Fatalf("message %d: %v, then %v", i, ms[i], ms2[i])
			}
			if ms[i].Election != "" {
				if err := CheckElectionName(ms[i].Election); err != nil {
					t.Fatalf("accepted election name %q: %v", ms[i].Election, err)
				}
			}
		}
	})
}

// FuzzReadBatchFrame reads a stream of v2 frames as a stream reader does,
// reusing the frame buffer and the decoder.
func FuzzReadBatchFrame(f *testing.F) {
	for _, c := range hostileBatches(f) {
		if len(c.body) <= testMax {
			f.Add(frameOf(c.body))
		}
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(binary.BigEndian.AppendUint32(nil, testMax+1))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var fr frameReader
		var bd batchDecoder
		var ms []protocols.Message
		for {
			before := r.Len()
			body, err := fr.readBody(r, testMax)
			if err == io.EOF {
				return
			}
			if err == nil {
				ms, err = bd.decode(ms, body)
			}
			if err != nil {
				if Reason(err) == ReasonOther {
					t.Fatalf("error without a reason: %v", err)
				}
				if errors.Is(err, ErrFrameTooLarge) && before-r.Len() != HeaderLen {
					t.Fatalf("oversized frame: read %d bytes, want only the header", before-r.Len())
				}
				return
			}
			for _, m := range ms {
				checkBatchRoundTrip(t, m)
			}
		}
	})
}

func checkBatchRoundTrip(t *testing.T, m protocols.Message) {
	t.Helper()
	body, err := EncodeBatch([]protocols.Message{m})
	if err != nil {
		t.Fatalf("re-encode %v: %v", m, err)
	}
	ms, err := DecodeBatch(body)
	if err != nil || len(ms) != 1 || ms[0] != m {
		t.Fatalf("re-decode: %v, %v; want %v", ms, err, m)
	}
}

// TestBatchDecoderReuse: a stream's decoder carries nothing from one frame
// to the next (a field set in one frame's message is not left in the
// next's, whose map omits it).
func TestBatchDecoderReuse(t *testing.T) {
	var bd batchDecoder
	full := protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 9, Voters: "n1,n2", Election: "db", Round: 4}
	bare := protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2}
	var ms []protocols.Message
	for i, want := range []protocols.Message{full, bare, full, bare} {
		body, err := EncodeBatch([]protocols.Message{want})
		if err != nil {
			t.Fatal(err)
		}
		if ms, err = bd.decode(ms, body); err != nil || len(ms) != 1 || ms[0] != want {
			t.Fatalf("frame %d: %v, %v; want %v", i, ms, err, want)
		}
	}
	// A voter list remembered as valid does not vouch for another.
	bad := cat([]byte{0x91, 0x82, 0xa1, 'k', 0x05, 0xa1, 'v', 0xa5}, []byte("n2,n1"))
	for range 2 {
		if _, err := bd.decode(ms, bad); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("unsorted voters after valid ones: err %v, want ErrOutOfRange", err)
		}
	}
}

func ExampleEncodeBatch() {
	body, _ := EncodeBatch([]protocols.Message{
		{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 3},
		{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 5, Election: "db"},
	})
	ms, _ := DecodeBatch(body)
	fmt.Println(len(body), "bytes:", ms[0].Election == "", ms[1].Election)
	// Output: 35 bytes: true db
}
