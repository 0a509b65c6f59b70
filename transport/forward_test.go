package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/conclave-agent/conclave/protocols"
)

func TestForwardVotersRoundTrip(t *testing.T) {
	a := newTestHost(t, 1, nil)
	b := newTestHost(t, 2, nil)
	admit(t, a, b)
	admit(t, b, a)
	got := make(chan VoterRequest, 1)
	b.HandleVoters(func(_ context.Context, from protocols.ID, req VoterRequest) VoterReply {
		if from != 1 {
			return VoterReply{Code: ForwardRefused, Error: "wrong sender"}
		}
		got <- req
		return VoterReply{Code: ForwardOK, Term: 3, Index: 7, Voters: "n1,n2,n4", Leader: "n2", PendingTerm: 3, PendingIndex: 8, PendingVoters: "n1,n2"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := a.ForwardVoters(ctx, 2, VoterRequest{Add: "n4"})
	if err != nil {
		t.Fatal(err)
	}
	if req := <-got; req != (VoterRequest{Add: "n4"}) {
		t.Errorf("handler got %+v", req)
	}
	if want := (VoterReply{Code: ForwardOK, Term: 3, Index: 7, Voters: "n1,n2,n4", Leader: "n2", PendingTerm: 3, PendingIndex: 8, PendingVoters: "n1,n2"}); rep != want {
		t.Errorf("reply %+v, want %+v", rep, want)
	}
	// A host that is not a member may not forward.
	c := newTestHost(t, 3, nil)
	admit(t, c, b)
	if _, err := c.ForwardVoters(ctx, 2, VoterRequest{Remove: "n1"}); err == nil {
		t.Fatal("a non-member's forward was answered")
	}
	if dropped(b, DropUnauthorized) == 0 {
		t.Error("the non-member's stream was not counted as unauthorized")
	}
	if _, err := a.ForwardVoters(ctx, 9, VoterRequest{Add: "n4"}); err == nil {
		t.Error("forward to an unknown member did not fail")
	}
}

func frame(body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(out, body...)
}

func mustMsgpack(t testing.TB, v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileForwardBodies are request and reply bodies a broken or hostile
// member might send.
func hostileForwardBodies(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"empty":             {},
		"not a map":         {0x93, 1, 2, 3},
		"negative code":     mustMsgpack(t, map[string]any{"c": -1}),
		"code too large":    mustMsgpack(t, map[string]any{"c": 200}),
		"string code":       mustMsgpack(t, map[string]any{"c": "x"}),
		"long name":         mustMsgpack(t, map[string]any{"a": strings.Repeat("x", protocols.MaxNameLen+1)}),
		"long voters":       mustMsgpack(t, map[string]any{"c": 0, "v": strings.Repeat("x,", protocols.MaxVotersLen)}),
		"duplicate":         {0x82, 0xa1, 'a', 0xa1, 'x', 0xa1, 'a', 0xa1, 'y'},
		"string claims 4GB": {0x81, 0xa1, 'a', 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},
		"map claims 4G":     {0xdf, 0xff, 0xff, 0xff, 0xff},
		"trailing":          append(mustMsgpack(t, map[string]any{"a": "n1"}), 0xc0),
		"unknown field":     mustMsgpack(t, map[string]any{"a": "n1", "zz": []int{1, 2}}),
		"good request":      mustMsgpack(t, VoterRequest{Remove: "n3"}),
		"good reply":        mustMsgpack(t, VoterReply{Code: ForwardRefused, Error: "no", Leader: "n1"}),
	}
}

func TestDecodeForwardRefusesBadInput(t *testing.T) {
	for name, body := range hostileForwardBodies(t) {
		_, rerr := DecodeVoterRequest(body)
		_, perr := DecodeVoterReply(body)
		switch name {
		case "good request", "unknown field":
			if rerr != nil {
				t.Errorf("%s: request: %v", name, rerr)
			}
		case "good reply":
			if perr != nil {
				t.Errorf("%s: reply: %v", name, perr)
			}
		default:
			if rerr == nil && name != "negative code" && name != "code too large" && name != "string code" && name != "long voters" {
				t.Errorf("%s: request decoded", name)
			}
			if perr == nil && name != "long name" && name != "duplicate" {
				t.Errorf("%s: reply decoded", name)
			}
		}
		for _, err := range []error{rerr, perr} {
			if err != nil && Reason(err) == ReasonOther {
				t.Errorf("%s: error without a reason: %v", name, err)
			}
		}
	}
	// The length prefix is checked before anything is allocated.
	_, err := readForward(bytes.NewReader(binary.BigEndian.AppendUint32(nil, MaxForwardBytes+1)))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
	if _, err := readForward(bytes.NewReader(frame([]byte{0x80})[:3])); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated header: %v", err)
	}
}

func FuzzDecodeVoterRequest(f *testing.F) {
	for _, b := range hostileForwardBodies(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeVoterRequest(body)
		if err != nil {
			if Reason(err) == ReasonOther {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		enc, err := EncodeVoterRequest(req)
		if err != nil {
			t.Fatalf("encode %+v: %v", req, err)
		}
		again, err := DecodeVoterRequest(enc[HeaderLen:])
		if err != nil || again != req {
			t.Fatalf("round trip: %+v → %+v, %v", req, again, err)
		}
	})
}

func FuzzDecodeVoterReply(f *testing.F) {
	for _, b := range hostileForwardBodies(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := DecodeVoterReply(body)
		if err != nil {
			if Reason(err) == ReasonOther {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if len(rep.Voters) > protocols.MaxVotersLen || rep.Code >= forwardCodes {
			t.Fatalf("out of range reply decoded: %+v", rep)
		}
		enc, err := EncodeVoterReply(rep)
		if err != nil {
			// A reply of a long error and many voters may not fit.
			if errors.Is(err, ErrFrameTooLarge) {
				return
			}
			t.Fatalf("encode %+v: %v", rep, err)
		}
		again, err := DecodeVoterReply(enc[HeaderLen:])
		if err != nil || again != rep {
			t.Fatalf("round trip: %+v → %+v, %v", rep, again, err)
		}
	})
}
