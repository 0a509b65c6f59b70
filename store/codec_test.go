package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

// TestEncodingIsStable pins the version-2 layout: a change here breaks every
// existing data directory and needs a new version, not an edit.
func TestEncodingIsStable(t *testing.T) {
	got := Encode(protocols.HardState{Term: 0x0102030405060708, Vote: 9, Epoch: 0x0a,
		Config: protocols.Configuration{Term: 0x0b, Index: 0x0c, Voters: "a,b"}})
	want := []byte{
		'C', 'N', 'H', 'S', 0, 2, 0, 0,
		1, 2, 3, 4, 5, 6, 7, 8,
		0, 0, 0, 0, 0, 0, 0, 9,
		0, 0, 0, 0, 0, 0, 0, 0x0a,
		0, 0, 0, 0, 0, 0, 0, 0x0b,
		0, 0, 0, 0, 0, 0, 0, 0x0c,
		0, 3, 'a', ',', 'b',
	}
	if !bytes.Equal(got[:len(want)], want) || len(got) != len(want)+4 {
		t.Fatalf("Encode = % x, want % x and a checksum", got, want)
	}
}

// TestOldRecordStillLoads reads a version-1 record written by the build
// before configurations were replicated (checked in, never regenerated).
func TestOldRecordStillLoads(t *testing.T) {
	b, err := os.ReadFile("testdata/v1.hardstate")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != RecordSizeV1 {
		t.Fatalf("testdata/v1.hardstate is %d bytes, want %d", len(b), RecordSizeV1)
	}
	hs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := (protocols.HardState{Term: 7, Vote: 3, Epoch: 7}); hs != want {
		t.Fatalf("Decode(v1) = %+v, want %+v", hs, want)
	}
	// Every single-bit flip of the old record is still refused.
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("v1 with byte %d flipped: %v", i, err)
		}
	}
	// Saving over it writes version 2 and refuses to go back.
	s := openT(t, t.TempDir())
	if err := os.WriteFile(s.Path(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	next := protocols.HardState{Term: 8, Epoch: 8, Config: protocols.Configuration{Term: 8, Index: 2, Voters: "n1,n2,n3"}, ConfigCommitted: true}
	if err := s.Save(next); err != nil {
		t.Fatal(err)
	}
	if got, err := openT(t, s.dir).Load(); err != nil || got != next {
		t.Fatalf("reload: %+v, %v", got, err)
	}
}

func TestConfigurationNeverGoesBack(t *testing.T) {
	s := openT(t, t.TempDir())
	c := protocols.Configuration{Term: 5, Index: 4, Voters: "a,b,c"}
	if err := s.Save(protocols.HardState{Term: 5, Epoch: 5, Config: c}); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]protocols.Configuration{
		"lower index":   {Term: 6, Index: 3, Voters: "a,b,c"},
		"lower version": {Term: 4, Index: 4, Voters: "a,b,c"},
		"dropped":       {},
	} {
		if err := s.Save(protocols.HardState{Term: 6, Epoch: 6, Config: bad}); !errors.Is(err, ErrRegression) {
			t.Errorf("%s: Save = %v, want ErrRegression", name, err)
		}
	}
	if err := s.Save(protocols.HardState{Term: 6, Epoch: 6, Config: protocols.Configuration{Term: 6, Index: 5, Voters: "a,b"}}); err != nil {
		t.Fatalf("a newer configuration: %v", err)
	}
}

func TestDecodeRejectsBadConfigurations(t *testing.T) {
	long := strings.Repeat("x", 70)
	many := make([]string, protocols.MaxVoters+1)
	for i := range many {
		many[i] = string(rune('a'+i%26)) + strings.Repeat("y", i/26+1)
	}
	for name, c := range map[string]protocols.Configuration{
		"unsorted":       {Term: 1, Index: 1, Voters: "b,a"},
		"duplicate":      {Term: 1, Index: 1, Voters: "a,a"},
		"empty name":     {Term: 1, Index: 1, Voters: "a,,b"},
		"name too long":  {Term: 1, Index: 1, Voters: long},
		"bad character":  {Term: 1, Index: 1, Voters: "a b"},
		"too many":       {Term: 1, Index: 1, Voters: strings.Join(many, ",")},
		"index, no list": {Term: 1, Index: 1},
	} {
		b := Encode(protocols.HardState{Term: 1, Epoch: 1, Config: c})
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	// The committed flag on a bootstrap configuration, and on version 1.
	b := Encode(protocols.HardState{Term: 1, Config: protocols.Configuration{Voters: "a"}, ConfigCommitted: true})
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("committed bootstrap: Decode = %v, want ErrCorrupt", err)
	}
	v1 := encodeV1(protocols.HardState{Term: 1})
	v1[7] = 1
	if _, err := Decode(reseal(v1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("v1 with a flag: Decode = %v, want ErrCorrupt", err)
	}
	// A length field that disagrees with the record's size.
	b = Encode(protocols.HardState{Term: 1, Config: protocols.Configuration{Index: 1, Voters: "a"}, ConfigCommitted: true})
	binary.BigEndian.PutUint16(b[48:50], 2)
	if _, err := Decode(reseal(b)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad length: Decode = %v, want ErrCorrupt", err)
	}
}

func TestDecodeRejectsValidChecksumOverBadHeader(t *testing.T) {
	// A record whose checksum matches but whose header is wrong: a file
	// from another program or a future version.
	for name, mutate := range map[string]func([]byte){
		"magic":    func(b []byte) { b[0] = 'X' },
		"version":  func(b []byte) { b[5] = 3 },
		"reserved": func(b []byte) { b[7] = 2 },
	} {
		for _, b := range [][]byte{Encode(protocols.HardState{Term: 1}), encodeV1(protocols.HardState{Term: 1})} {
			mutate(b)
			b = reseal(b)
			if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s (%d bytes): Decode = %v, want ErrCorrupt", name, len(b), err)
			}
		}
	}
	// A version-1 header on a version-2 record and the reverse.
	v2 := Encode(protocols.HardState{Term: 1})
	v2[5] = 1
	v1 := encodeV1(protocols.HardState{Term: 1})
	v1[5] = 2
	for _, b := range [][]byte{v2, v1} {
		if _, err := Decode(reseal(b)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("version swapped (%d bytes): Decode = %v, want ErrCorrupt", len(b), err)
		}
	}
}

// encodeV1 writes the old format, as the previous build did.
func encodeV1(hs protocols.HardState) []byte {
	b := make([]byte, RecordSizeV1)
	copy(b[0:4], magic[:])
	binary.BigEndian.PutUint16(b[4:6], recordVersionV1)
	binary.BigEndian.PutUint64(b[8:16], hs.Term)
	binary.BigEndian.PutUint64(b[16:24], uint64(hs.Vote))
	binary.BigEndian.PutUint64(b[24:32], hs.Epoch)
	return reseal(b)
}

// reseal recomputes the checksum of b in place and returns it.
func reseal(b []byte) []byte {
	end := len(b) - 4
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(protocols.HardState{}))
	f.Add(Encode(protocols.HardState{Term: 7, Vote: 3, Epoch: 7}))
	f.Add(Encode(protocols.HardState{Term: 7, Vote: 3, Epoch: 7, Config: protocols.Configuration{Term: 6, Index: 2, Voters: "n1,n2,n3"}}))
	f.Add(encodeV1(protocols.HardState{Term: 7, Vote: 3, Epoch: 7}))
	f.Add([]byte{})
	f.Add([]byte("CNHS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Exactly one encoding per state and version: anything Decode
		// accepts must be what Encode (or the old build) would have
		// written.
		again := Encode(hs)
		if len(b) == RecordSizeV1 {
			again = encodeV1(hs)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("Decode accepted % x, which re-encodes as % x", b, again)
		}
	})
}
