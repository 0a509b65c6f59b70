package transport

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/conclave-agent/conclave/protocols"
)

// TestRoundField: a Peterson message's round survives the trip, a message
// without the "rd" key (every kind but Peterson's, and every older peer)
// decodes with round 0, and a negative round is refused, not wrapped.
func TestRoundField(t *testing.T) {
	m := protocols.Message{Kind: protocols.MsgPetersonSecond, From: 2, To: 3, Candidate: 7, Phase: 2, Hops: 1, Round: 1 << 40, Epoch: 9}
	body, err := EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMessage(body)
	if err != nil || got != m {
		t.Fatalf("round trip: %v, %v; want %v", got, err, m)
	}

	old, err := msgpack.Marshal(map[string]uint64{"k": uint64(protocols.MsgRingElect), "f": 2, "t": 1, "c": 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeMessage(old); err != nil || got.Round != 0 {
		t.Fatalf("message without a round: %v, %v; want round 0", got, err)
	}

	neg, err := msgpack.Marshal(map[string]int64{"k": int64(protocols.MsgPetersonFirst), "rd": -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMessage(neg); !errors.Is(err, ErrMalformed) {
		t.Fatalf("negative round: err %v, want ErrMalformed", err)
	}
}
