package keyring

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// Requests and answers survive their encoding, and every way of bending
// one is refused; another version is refused by name.
func TestQueryCodec(t *testing.T) {
	sent := time.UnixMilli(1_790_000_000_123)
	for _, r := range []Request{
		{Op: OpList, Sent: sent},
		{Op: OpInstall, Key: key(1), Sent: sent},
		{Op: OpUse, Key: key(2)[:16], Sent: sent},
		{Op: OpRemove, Key: key(3)[:24], Sent: sent},
	} {
		b, err := AppendRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("%v: %v", r.Op, err)
		}
		if got.Op != r.Op || !bytes.Equal(got.Key, r.Key) || !got.Sent.Equal(r.Sent) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
	}
	for name, r := range map[string]Request{
		"list with a key":   {Op: OpList, Key: key(1)},
		"install no key":    {Op: OpInstall},
		"use a short key":   {Op: OpUse, Key: key(1)[:5]},
		"an unknown op":     {Op: 9, Key: key(1)},
		"remove a long key": {Op: OpRemove, Key: append(key(1), 0)},
	} {
		if _, err := AppendRequest(nil, r); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	good, _ := AppendRequest(nil, Request{Op: OpInstall, Key: key(1), Sent: sent})
	for name, b := range map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)-1],
		"trailing":       append(bytes.Clone(good), 0),
		"header only":    good[:5],
		"unknown op":     append([]byte{WireVersion, 7}, good[2:]...),
		"key length lie": append(append(bytes.Clone(good[:10]), 16), good[11:]...),
	} {
		if _, err := DecodeRequest(b); err == nil {
			t.Errorf("request %s: decoded", name)
		}
	}
	_, err := DecodeRequest(append([]byte{2}, good[1:]...))
	if !errors.Is(err, ErrWireVersion) || !strings.Contains(err.Error(), "request version 2, this agent reads version 1") {
		t.Errorf("request version 2: %v", err)
	}

	a := Answer{Err: "keyring: key 1234abcd is the primary", Keys: [][]byte{key(1), key(2)[:16]}}
	b, err := AppendAnswer(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Err != a.Err || len(got.Keys) != 2 || !bytes.Equal(got.Keys[0], a.Keys[0]) || !bytes.Equal(got.Keys[1], a.Keys[1]) {
		t.Errorf("answer round trip: got %+v, want %+v", got, a)
	}
	long, err := AppendAnswer(nil, Answer{Err: strings.Repeat("é", maxAnswerErr)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeAnswer(long); err != nil || len(got.Err) > maxAnswerErr {
		t.Errorf("a long error text: %d bytes, %v", len(got.Err), err)
	}
	nine := make([][]byte, MaxKeys+1)
	for i := range nine {
		nine[i] = key(byte(i + 1))
	}
	for name, a := range map[string]Answer{
		"too many keys": {Keys: nine},
		"a short key":   {Keys: [][]byte{key(1)[:3]}},
		"a key twice":   {Keys: [][]byte{key(1), key(1)}},
	} {
		if _, err := AppendAnswer(nil, a); err == nil {
			t.Errorf("answer %s: encoded", name)
		}
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"truncated":    b[:len(b)-1],
		"trailing":     append(bytes.Clone(b), 0),
		"no key count": b[:1+1+len(a.Err)],
		"count lie":    append(append(bytes.Clone(b[:1+1+len(a.Err)]), 9), b[2+len(a.Err)+1:]...),
		"bad utf-8":    {WireVersion, 1, 0xff, 0},
		"long text":    append([]byte{WireVersion, 0x81, 0x04}, make([]byte, 513)...),
		"too long":     append(bytes.Clone(b), make([]byte, MaxAnswerLen)...),
	} {
		if _, err := DecodeAnswer(in); err == nil {
			t.Errorf("answer %s: decoded", name)
		}
	}
	_, err = DecodeAnswer(append([]byte{3}, b[1:]...))
	if !errors.Is(err, ErrWireVersion) || !strings.Contains(err.Error(), "answer version 3, this agent reads version 1") {
		t.Errorf("answer version 3: %v", err)
	}
}

// FuzzDecodeRequest: any input either fails or decodes to a request that
// encodes back to the same bytes.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []Request{{Op: OpList}, {Op: OpUse, Key: key(1), Sent: time.UnixMilli(1e12)}} {
		b, _ := AppendRequest(nil, r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		out, err := AppendRequest(nil, r)
		if err != nil {
			t.Fatalf("decoded request does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip changed the request:\n in %x\nout %x", b, out)
		}
	})
}

// FuzzDecodeAnswer: any input either fails or decodes to an answer that
// encodes back to the same bytes.
func FuzzDecodeAnswer(f *testing.F) {
	for _, a := range []Answer{{}, {Err: "refused", Keys: [][]byte{key(1), key(2)[:24]}}} {
		b, _ := AppendAnswer(nil, a)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAnswer(b)
		if err != nil {
			return
		}
		out, err := AppendAnswer(nil, a)
		if err != nil {
			t.Fatalf("decoded answer does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip changed the answer:\n in %x\nout %x", b, out)
		}
	})
}
