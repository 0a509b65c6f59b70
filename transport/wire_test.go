package transport

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/conclave-agent/conclave/protocols"
)

// msgpackWire is the reference encoder the hand-written one replaced.
func msgpackWire(t testing.TB, w wireMessage) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(w); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// referenceDecode decodes one map with msgpack/v5, as DecodeMessage did
// before it read the bytes itself.
func referenceDecode(body []byte) (wireMessage, error) {
	var w wireMessage
	err := msgpack.NewDecoder(bytes.NewReader(body)).Decode(&w)
	return w, err
}

// TestEncodeMatchesMsgpack: appendWire writes msgpack/v5's bytes for every
// field at every integer width and string length class.
func TestEncodeMatchesMsgpack(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	voters := []string{"", "n1", strings.Repeat("n", 31), strings.Repeat("n", 32), strings.Repeat("n", 255), strings.Repeat("n", 256), strings.Repeat("n", 70000)}
	for range 5000 {
		m := randomMessage(r)
		m.Election = electionNames[r.IntN(len(electionNames))]
		w := toWire(m)
		if r.IntN(4) == 0 {
			w.Voters = voters[r.IntN(len(voters))]
		}
		if got, want := appendWire(nil, &w), msgpackWire(t, w); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nhand    %x\nmsgpack %x", w, got, want)
		}
	}
	// Every field set at once: a map of 19 entries (map16).
	w := wireMessage{Kind: 1, From: 2, To: 3, Term: 4, Epoch: 5, Reject: true, Leader: 6, Candidate: 7, Phase: 8, Hops: 9,
		Direction: 1, Context: 10, ConfigTerm: 11, ConfigIndex: 12, Voters: "n1", Commit: 13, Candidacy: 14, Round: 15, Election: "db"}
	if got, want := appendWire(nil, &w), msgpackWire(t, w); !bytes.Equal(got, want) {
		t.Fatalf("all fields:\nhand    %x\nmsgpack %x", got, want)
	}
}

// TestDecodeMatchesMsgpack: whatever decodeMap accepts, msgpack/v5 decodes
// to the same fields.
func TestDecodeMatchesMsgpack(t *testing.T) {
	var bodies [][]byte
	for _, c := range hostileBodies(t) {
		bodies = append(bodies, c.body)
	}
	r := rand.New(rand.NewPCG(4, 5))
	for range 5000 {
		w := toWire(randomMessage(r))
		bodies = append(bodies, msgpackWire(t, w))
	}
	for _, body := range bodies {
		checkDecodeMatches(t, body, false)
	}
	for _, c := range hostileBatches(t) {
		for _, m := range batchMaps(c.body) {
			checkDecodeMatches(t, m, true)
		}
	}
}

// batchMaps returns the maps of a batch body that walks as one, for the
// differential check (nil when the array header is bad).
func batchMaps(body []byte) [][]byte {
	w := walker{b: body}
	n, err := w.arrayLen()
	if err != nil {
		return nil
	}
	var out [][]byte
	for range n {
		start := w.off
		if err := w.skip(1); err != nil {
			return out
		}
		out = append(out, body[start:w.off])
	}
	return out
}

func checkDecodeMatches(t *testing.T, body []byte, named bool) {
	t.Helper()
	var got wireMessage
	w := walker{b: body}
	if err := decodeMap(&w, named, &got, nil); err != nil || w.off != len(body) {
		return // refused: nothing to compare
	}
	want, err := referenceDecode(body)
	if err != nil {
		t.Fatalf("%x: accepted, but msgpack refuses it: %v", body, err)
	}
	if got != want {
		t.Fatalf("%x:\nhand    %+v\nmsgpack %+v", body, got, want)
	}
}

// TestStringCacheBounded: a stream's cache hands out equal strings and
// stops growing at its bound, whatever a peer sends.
func TestStringCacheBounded(t *testing.T) {
	var c stringCache
	for i := range 10000 {
		s := c.get([]byte(strings.Repeat("x", i%300)))
		if len(s) != i%300 {
			t.Fatalf("got %d bytes, want %d", len(s), i%300)
		}
	}
	if c.bytes > stringCacheBytes {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes, stringCacheBytes)
	}
	var nilCache *stringCache
	if s := nilCache.get([]byte("db")); s != "db" {
		t.Fatalf("nil cache: %q", s)
	}
}

// BenchmarkDecodeBatch decodes a frame of 50 elections' heartbeats.
func BenchmarkDecodeBatch(b *testing.B) {
	msgs := make([]protocols.Message, 50)
	for i := range msgs {
		msgs[i] = protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 7, Epoch: 3, Context: uint64(i),
			ConfigTerm: 7, ConfigIndex: 2, Voters: "n1,n2,n3,n4,n5", Election: electionNames[2+i%4]}
	}
	body, err := EncodeBatch(msgs)
	if err != nil {
		b.Fatal(err)
	}
	var d batchDecoder
	var out []protocols.Message
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out, err = d.decode(out, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeBatch encodes a frame of 50 elections' heartbeats as the
// sender does, into reused buffers.
func BenchmarkEncodeBatch(b *testing.B) {
	msgs := make([]protocols.Message, 50)
	for i := range msgs {
		msgs[i] = protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2, Term: 7, Epoch: 3, Context: uint64(i),
			ConfigTerm: 7, ConfigIndex: 2, Voters: "n1,n2,n3,n4,n5", Election: electionNames[2+i%4]}
	}
	enc := newMapEncoder()
	var pk framePacker
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pk.reset(DefaultMaxMessageBytes)
		for _, m := range msgs {
			mb, err := enc.encode(m)
			if err != nil {
				b.Fatal(err)
			}
			pk.add(mb)
		}
		pk.flush()
	}
}
