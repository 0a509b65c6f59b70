package transport

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/conclave-agent/conclave/protocols"
)

// TestCandidacyField: the sender's candidacy survives the trip, a message
// from an older peer (no "cd" key) decodes as eligible with priority 0, and
// a value with bits beyond the ineligible flag is refused, not wrapped.
func TestCandidacyField(t *testing.T) {
	m := protocols.Message{Kind: protocols.MsgHeartbeatResp, From: 2, To: 1, Term: 3, Ineligible: true, Priority: 200}
	body, err := EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMessage(body)
	if err != nil || got != m {
		t.Fatalf("round trip: %v, %v; want %v", got, err, m)
	}

	old, err := msgpack.Marshal(map[string]uint64{"k": uint64(protocols.MsgHeartbeatResp), "f": 2, "t": 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err = DecodeMessage(old)
	if err != nil || got.Candidacy() != (protocols.Candidacy{}) {
		t.Fatalf("older peer's message: %v, %v; want eligible, priority 0", got, err)
	}

	for _, v := range []uint64{0x200, 0x1ff + 1, 1 << 40} {
		var buf bytes.Buffer
		if err := msgpack.NewEncoder(&buf).Encode(map[string]uint64{"k": uint64(protocols.MsgHeartbeatResp), "cd": v}); err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeMessage(buf.Bytes()); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("candidacy %#x: err %v, want ErrOutOfRange", v, err)
		}
	}
}
