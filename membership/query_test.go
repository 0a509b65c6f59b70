package membership

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// A frame survives its encoding, and every way of bending one is refused.
func TestQueryFrameCodec(t *testing.T) {
	f := queryFrame{kind: kindAnswer, id: [QueryIDLen]byte{1, 2, 3}, from: "n1", body: []byte("answer")}
	b, err := appendQueryFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeQueryFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.kind != f.kind || got.id != f.id || got.from != f.from || !bytes.Equal(got.body, f.body) {
		t.Fatalf("round trip: got %+v, want %+v", got, f)
	}
	if _, err := appendQueryFrame(nil, queryFrame{kind: kindRequest, from: "n1", body: make([]byte, MaxQueryBody+1)}); err == nil {
		t.Error("a body beyond MaxQueryBody was encoded")
	}
	if _, err := appendQueryFrame(nil, queryFrame{kind: kindRequest}); err == nil {
		t.Error("a frame without a sender name was encoded")
	}
	bad := map[string][]byte{
		"empty":          nil,
		"announcement":   {0xA7, 1, 2},
		"version 2":      append([]byte{queryMagic, 2}, b[2:]...),
		"unknown kind":   append([]byte{queryMagic, queryVersion, 9}, b[3:]...),
		"truncated":      b[:len(b)-1],
		"trailing bytes": append(append([]byte(nil), b...), 0),
		"header only":    b[:3+QueryIDLen],
		"no name":        append(append([]byte(nil), b[:3+QueryIDLen]...), 0, 0),
		"too long":       append(append([]byte(nil), b...), make([]byte, maxQueryFrame)...),
	}
	for name, in := range bad {
		if _, err := decodeQueryFrame(in); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	_, err = decodeQueryFrame(append([]byte{queryMagic, 2}, b[2:]...))
	if err == nil || !strings.Contains(err.Error(), "version 2, this agent reads version 1") {
		t.Errorf("version 2: error %v does not name both versions", err)
	}
}

// FuzzDecodeQueryFrame: any input either fails or decodes to a frame that
// encodes back to the same bytes.
func FuzzDecodeQueryFrame(f *testing.F) {
	for _, fr := range []queryFrame{
		{kind: kindRequest, id: [QueryIDLen]byte{7}, from: "n1", body: []byte{1, 0, 0}},
		{kind: kindAnswer, from: strings.Repeat("x", maxQueryName), body: make([]byte, 300)},
	} {
		b, _ := appendQueryFrame(nil, fr)
		f.Add(b)
	}
	f.Add([]byte{queryMagic})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeQueryFrame(b)
		if err != nil {
			return
		}
		out, err := appendQueryFrame(nil, fr)
		if err != nil {
			t.Fatalf("decoded frame does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip changed the frame:\n in %x\nout %x", b, out)
		}
	})
}

// Three keyed members: a query from n1 reaches n2 and n3 and their
// answers come back, each naming its member; a member that is down gets
// an error, not a hang; a member with no handler yet is reported as not
// answering once the context ends.
func TestQueryAnswersFromMembers(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 32)
	var ns []*node
	for i, name := range []string{"n1", "n2", "n3", "n4"} {
		var join []string
		if i > 0 {
			join = []string{ns[0].LocalAddr()}
		}
		c := testConfig(name, protocols.ID(i+1), join...)
		c.Keys = [][]byte{key}
		ns = append(ns, start(t, c))
	}
	ns[0].w.until(t, "all four alive", func(v map[string]Member) bool {
		return isAlive(v, "n2") && isAlive(v, "n3") && isAlive(v, "n4")
	})
	for _, n := range ns[1:3] {
		n.ServeQueries(func(from string, _ [QueryIDLen]byte, body []byte) []byte {
			return append([]byte(n.name+" answers "+from+": "), body...)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	got := ns[0].Query(ctx, []string{"n2", "n3", "n4", "n9", "n1"}, []byte("ping"))
	want := []struct{ body, err string }{
		{body: "n2 answers n1: ping"},
		{body: "n3 answers n1: ping"},
		{err: "no answer in time"},
		{err: "not alive in gossip"},
		{err: "not sent to this member itself"},
	}
	for i, w := range want {
		a := got[i]
		switch {
		case w.err == "" && (a.Err != nil || string(a.Body) != w.body):
			t.Errorf("%s: answer %q, error %v; want %q", a.Member, a.Body, a.Err, w.body)
		case w.err != "" && (a.Err == nil || !strings.Contains(a.Err.Error(), w.err)):
			t.Errorf("%s: answer %q, error %v; want an error saying %q", a.Member, a.Body, a.Err, w.err)
		}
	}
	if !errors.Is(got[2].Err, context.DeadlineExceeded) {
		t.Errorf("n4's error %v does not wrap the context's", got[2].Err)
	}
}
