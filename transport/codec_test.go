package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the hostile seeds under testdata/fuzz")

// heartbeatBody is the msgpack body of a small valid message, used to build
// hostile variants.
func heartbeatBody(t testing.TB) []byte {
	t.Helper()
	b, err := EncodeMessage(protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 3, Context: 9})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func repeat(b []byte, n int) []byte { return bytes.Repeat(b, n) }

// fixstr "z": an unknown key, whose value the walker must skip safely.
var keyZ = []byte{0x81, 0xa1, 'z'}

type bodyCase struct {
	name string
	body []byte
	want error // nil: must decode
}

// hostileBodies are the traps measured against msgpack/v5 v5.4.1 (huge
// declared lengths, deep nesting, trailing bytes, silent narrowing) and the
// type confusions our schema must refuse.
func hostileBodies(t testing.TB) []bodyCase {
	hb := heartbeatBody(t)
	return []bodyCase{
		{"valid_heartbeat", hb, nil},
		{"voters_valid", cat([]byte{0x83, 0xa1, 'k', 0x05, 0xa2, 'c', 'i', 0x02, 0xa1, 'v', 0xa5}, []byte("n1,n2")), nil},
		{"voters_not_a_string", []byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'v', 0x07}, ErrMalformed},
		{"voters_unsorted", cat([]byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'v', 0xa5}, []byte("n2,n1")), ErrOutOfRange},
		{"voters_bad_name", cat([]byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'v', 0xa3}, []byte("a b")), ErrOutOfRange},
		{"voters_too_long", cat([]byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'v', 0xda, 0x08, 0x30}, repeat([]byte("a"), 0x830)), ErrOutOfRange},
		{"unknown_field_skipped", cat([]byte{0x82, 0xa1, 'k', 0x05, 0xa2, 'z', 'z', 0x92, 0x01, 0x91, 0xa0}), nil},
		{"str32_4GiB", cat(keyZ, []byte{0xdb, 0xff, 0xff, 0xff, 0xff}), ErrMalformed},
		{"bin32_4GiB", cat(keyZ, []byte{0xc6, 0xff, 0xff, 0xff, 0xff}), ErrMalformed},
		{"array32_2G", cat(keyZ, []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}), ErrMalformed},
		{"map32_4G_nested", cat(keyZ, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}), ErrMalformed},
		{"map32_4G_top", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0}, ErrMalformed},
		{"key_str32_4GiB", []byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"array16_short", cat(keyZ, []byte{0xdc, 0xff, 0xff, 0x01, 0x02}), ErrMalformed},
		{"deep_array_nesting", cat(keyZ, repeat([]byte{0x91}, 10000), []byte{0xc0}), ErrMalformed},
		{"deep_map_nesting", cat(keyZ, repeat(keyZ, 5000), []byte{0xc0}), ErrMalformed},
		{"trailing_garbage", cat(hb, []byte{0xc0}), ErrTrailingBytes},
		{"trailing_message", cat(hb, hb), ErrTrailingBytes},
		{"kind_256_wraps", []byte{0x81, 0xa1, 'k', 0xcd, 0x01, 0x00}, ErrOutOfRange},
		{"kind_2pow64", []byte{0x81, 0xa1, 'k', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ErrOutOfRange},
		{"kind_negative_fixint", []byte{0x81, 0xa1, 'k', 0xff}, ErrMalformed},
		{"kind_negative_int64", []byte{0x81, 0xa1, 'k', 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"from_negative", []byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'f', 0xd0, 0xff}, ErrMalformed},
		{"kind_float", []byte{0x81, 0xa1, 'k', 0xca, 0x40, 0xa0, 0, 0}, ErrMalformed},
		{"kind_string", []byte{0x81, 0xa1, 'k', 0xa1, 'x'}, ErrMalformed},
		{"kind_nil", []byte{0x81, 0xa1, 'k', 0xc0}, ErrMalformed},
		{"kind_unknown_200", []byte{0x81, 0xa1, 'k', 0xcc, 200}, ErrUnknownKind},
		{"kind_zero", []byte{0x81, 0xa1, 'k', 0x00}, ErrUnknownKind},
		{"kind_missing", []byte{0x81, 0xa1, 'f', 0x01}, ErrUnknownKind},
		{"empty_map", []byte{0x80}, ErrUnknownKind},
		{"phase_2pow32", []byte{0x82, 0xa1, 'k', 0x0d, 0xa1, 'p', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, ErrOutOfRange},
		{"hops_2pow32", []byte{0x82, 0xa1, 'k', 0x0d, 0xa1, 'h', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, ErrOutOfRange},
		{"direction_2", []byte{0x82, 0xa1, 'k', 0x0d, 0xa1, 'd', 0x02}, ErrOutOfRange},
		{"reject_as_int", []byte{0x82, 0xa1, 'k', 0x04, 0xa1, 'r', 0x01}, ErrMalformed},
		{"duplicate_field", []byte{0x82, 0xa1, 'k', 0x05, 0xa1, 'k', 0x06}, ErrMalformed},
		{"int_key", []byte{0x81, 0x01, 0x05}, ErrMalformed},
		{"ext_value", cat(keyZ, []byte{0xd4, 0x01, 0x00}), ErrMalformed},
		{"time_ext_value", cat(keyZ, []byte{0xd6, 0xff, 0, 0, 0, 1}), ErrMalformed},
		{"never_used_c1", cat(keyZ, []byte{0xc1}), ErrMalformed},
		{"nil_body", []byte{0xc0}, ErrMalformed},
		{"array_top", []byte{0x91, 0x05}, ErrMalformed},
		{"as_array_struct", []byte{0x92, 0x05, 0x01}, ErrMalformed},
		{"cut_inside_map", []byte{0x82, 0xa1, 'k', 0x05}, ErrMalformed},
		{"cut_inside_uint", []byte{0x81, 0xa1, 'k', 0xcd, 0x01}, ErrMalformed},
		{"empty_body", []byte{}, ErrMalformed},
	}
}

type frameCase struct {
	name  string
	frame []byte
	want  error
}

const testMax = 1024

// hostileFrames add the framing traps: lengths that must be refused before
// anything is allocated, and cuts inside the header or body.
func hostileFrames(t testing.TB) []frameCase {
	out := []frameCase{
		{"len_4GiB", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
		{"len_4GiB_with_body", cat([]byte{0xff, 0xff, 0xff, 0xff}, heartbeatBody(t)), ErrFrameTooLarge},
		{"len_max_plus_one", binary.BigEndian.AppendUint32(nil, testMax+1), ErrFrameTooLarge},
		{"len_zero", []byte{0, 0, 0, 0}, ErrMalformed},
		{"short_header", []byte{0, 0}, ErrTruncated},
		{"short_body", []byte{0, 0, 0, 0x10, 0x81}, ErrTruncated},
		{"empty_stream", nil, io.EOF},
	}
	for _, c := range hostileBodies(t) {
		if len(c.body) == 0 || len(c.body) > testMax {
			continue
		}
		out = append(out, frameCase{"body_" + c.name, frameOf(c.body), c.want})
	}
	return out
}

func TestDecodeMessageHostile(t *testing.T) {
	for _, c := range hostileBodies(t) {
		t.Run(c.name, func(t *testing.T) {
			m, err := DecodeMessage(c.body)
			if c.want == nil {
				if err != nil {
					t.Fatalf("DecodeMessage: %v", err)
				}
				if !m.Kind.Valid() {
					t.Fatalf("decoded invalid kind %v", m.Kind)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("DecodeMessage = %v, %v; want %v", m, err, c.want)
			}
			if Reason(err) == ReasonOther {
				t.Fatalf("error %v has no reason", err)
			}
		})
	}
}

func TestReadFrameHostile(t *testing.T) {
	for _, c := range hostileFrames(t) {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(c.frame), testMax)
			if c.want == nil {
				if err != nil {
					t.Fatalf("ReadFrame: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("ReadFrame error = %v; want %v", err, c.want)
			}
		})
	}
}

// failAfterHeader hands out one header and fails the test if anything more
// is read: an oversized frame must be refused from its header alone.
type failAfterHeader struct {
	t   *testing.T
	hdr []byte
}

func (r *failAfterHeader) Read(p []byte) (int, error) {
	if len(r.hdr) == 0 {
		r.t.Fatal("ReadFrame read past the header of an oversized frame")
	}
	n := copy(p, r.hdr)
	r.hdr = r.hdr[n:]
	return n, nil
}

func TestReadFrameRefusesOversizeFromHeader(t *testing.T) {
	for _, n := range []uint32{testMax + 1, 1 << 20, math.MaxUint32} {
		r := &failAfterHeader{t: t, hdr: binary.BigEndian.AppendUint32(nil, n)}
		if _, err := ReadFrame(r, testMax); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("length %d: err = %v, want ErrFrameTooLarge", n, err)
		}
	}
}

func TestReadFrameDefaultLimit(t *testing.T) {
	r := &failAfterHeader{t: t, hdr: binary.BigEndian.AppendUint32(nil, DefaultMaxMessageBytes+1)}
	if _, err := ReadFrame(r, 0); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
}

func TestReadFrameSequence(t *testing.T) {
	msgs := []protocols.Message{
		{Kind: protocols.MsgVote, From: 1, To: 2, Term: 7},
		{Kind: protocols.MsgVoteResp, From: 2, To: 1, Term: 7, Reject: true, Leader: 3},
		{Kind: protocols.MsgHSProbe, From: 5, To: 6, Candidate: 5, Phase: 3, Hops: 2, Direction: protocols.CounterClockwise},
	}
	var stream []byte
	for _, m := range msgs {
		var err error
		if stream, err = AppendFrame(stream, m); err != nil {
			t.Fatal(err)
		}
	}
	r := bytes.NewReader(stream)
	for i, want := range msgs {
		got, err := ReadFrame(r, testMax)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got != want {
			t.Fatalf("frame %d = %v, want %v", i, got, want)
		}
	}
	if _, err := ReadFrame(r, testMax); err != io.EOF {
		t.Fatalf("after last frame: err = %v, want io.EOF", err)
	}
}

func TestEncodeRefusesWhatDecodeRefuses(t *testing.T) {
	bad := []protocols.Message{
		{Kind: protocols.MsgInvalid},
		{Kind: protocols.MessageKind(200)},
		{Kind: protocols.MsgRingElect, Direction: 2},
	}
	for _, m := range bad {
		if b, err := EncodeFrame(m); err == nil {
			t.Errorf("EncodeFrame(%v) = %x, want an error", m, b)
		}
	}
}

func TestHeartbeatIsSmall(t *testing.T) {
	// A size check, not a timing: frames stay far below the default limit,
	// so the limit can be tight.
	f, err := EncodeFrame(protocols.Message{Kind: protocols.MsgHeartbeat, From: math.MaxUint64, To: math.MaxUint64,
		Term: math.MaxUint64, Epoch: math.MaxUint64, Context: math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	if len(f) > 128 {
		t.Fatalf("heartbeat frame is %d bytes", len(f))
	}
}

func randomMessage(r *rand.Rand) protocols.Message {
	kinds := protocols.AllKinds()
	// Mix small and full-width values so every msgpack integer width is hit.
	u64 := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return uint64(r.IntN(200))
		case 2:
			return r.Uint64() >> r.IntN(64)
		default:
			return math.MaxUint64 - uint64(r.IntN(3))
		}
	}
	return protocols.Message{
		Kind:      kinds[r.IntN(len(kinds))],
		From:      protocols.ID(u64()),
		To:        protocols.ID(u64()),
		Term:      u64(),
		Epoch:     u64(),
		Reject:    r.IntN(2) == 1,
		Leader:    protocols.ID(u64()),
		Candidate: protocols.ID(u64()),
		Phase:     uint32(u64()),
		Hops:      uint32(u64()),
		Direction: protocols.Direction(r.IntN(2)),
		Context:   u64(),
		// A configuration, or none.
		ConfigTerm:  u64(),
		ConfigIndex: u64(),
		Voters:      []string{"", "n1", "a,b,c", "n1,n2,n3,n4,n5"}[r.IntN(4)],
		Commit:      u64(),
		Ineligible:  r.IntN(2) == 1,
		Priority:    uint8(r.IntN(256)),
		Round:       u64(),
	}
}

// TestRoundTripProperty: decode(encode(m)) == m for random messages.
func TestRoundTripProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x636f6e636c617665))
	for i := 0; i < 20000; i++ {
		m := randomMessage(r)
		f, err := EncodeFrame(m)
		if err != nil {
			t.Fatalf("EncodeFrame(%v): %v", m, err)
		}
		got, err := ReadFrame(bytes.NewReader(f), testMax)
		if err != nil {
			t.Fatalf("ReadFrame(EncodeFrame(%v)): %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip: got %v, want %v", got, m)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, c := range hostileBodies(f) {
		f.Add(c.body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := DecodeMessage(body)
		if err != nil {
			if Reason(err) == ReasonOther {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		checkRoundTrip(t, m)
		// The hand-written decoder reads what msgpack/v5 reads.
		checkDecodeMatches(t, body, false)
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, c := range hostileFrames(f) {
		f.Add(c.frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var fr frameReader
		for {
			before := r.Len()
			m, err := fr.read(r, testMax)
			if err == io.EOF {
				return
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
			checkRoundTrip(t, m)
		}
	})
}

func checkRoundTrip(t *testing.T, m protocols.Message) {
	t.Helper()
	if !m.Kind.Valid() {
		t.Fatalf("accepted invalid kind %d", m.Kind)
	}
	body, err := EncodeMessage(m)
	if err != nil {
		t.Fatalf("re-encode %v: %v", m, err)
	}
	m2, err := DecodeMessage(body)
	if err != nil || m2 != m {
		t.Fatalf("re-decode: %v, %v; want %v", m2, err, m)
	}
}

// TestSeedCorpus keeps testdata/fuzz in step with the hostile tables, so
// the committed corpus always holds the measured traps. Run with
// -update-corpus after changing a table.
func TestSeedCorpus(t *testing.T) {
	sets := map[string]map[string][]byte{
		"FuzzDecodeMessage":  {},
		"FuzzReadFrame":      {},
		"FuzzDecodeBatch":    {},
		"FuzzReadBatchFrame": {},
	}
	for _, c := range hostileBatches(t) {
		sets["FuzzDecodeBatch"]["seed_"+c.name] = c.body
		if len(c.body) <= testMax {
			sets["FuzzReadBatchFrame"]["seed_"+c.name] = frameOf(c.body)
		}
	}
	for _, c := range hostileBodies(t) {
		sets["FuzzDecodeMessage"]["seed_"+c.name] = c.body
	}
	for _, c := range hostileFrames(t) {
		sets["FuzzReadFrame"]["seed_"+c.name] = c.frame
	}
	for target, files := range sets {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range files {
			path := filepath.Join(dir, name)
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if *updateCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("seed missing (run go test -run TestSeedCorpus -update-corpus): %v", err)
			}
			if string(got) != want {
				t.Fatalf("%s is stale (run go test -run TestSeedCorpus -update-corpus)", path)
			}
		}
	}
}
