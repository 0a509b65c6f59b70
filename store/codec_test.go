package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

// TestEncodingIsStable pins the version-1 layout: a change here breaks every
// existing data directory and needs a new version, not an edit.
func TestEncodingIsStable(t *testing.T) {
	got := Encode(protocols.HardState{Term: 0x0102030405060708, Vote: 9, Epoch: 0x0a})
	want := []byte{
		'C', 'N', 'H', 'S', 0, 1, 0, 0,
		1, 2, 3, 4, 5, 6, 7, 8,
		0, 0, 0, 0, 0, 0, 0, 9,
		0, 0, 0, 0, 0, 0, 0, 0x0a,
	}
	if !bytes.Equal(got[:32], want) {
		t.Fatalf("Encode = % x, want % x", got[:32], want)
	}
	if len(got) != RecordSize {
		t.Fatalf("len = %d, want %d", len(got), RecordSize)
	}
}

func TestDecodeRejectsValidChecksumOverBadHeader(t *testing.T) {
	// A record whose checksum matches but whose header is wrong: a file
	// from another program or a future version.
	for name, mutate := range map[string]func([]byte){
		"magic":    func(b []byte) { b[0] = 'X' },
		"version":  func(b []byte) { b[5] = 2 },
		"reserved": func(b []byte) { b[7] = 1 },
	} {
		b := Encode(protocols.HardState{Term: 1})
		mutate(b)
		b = reseal(b)
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// reseal recomputes the checksum of b in place and returns it.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[32:36], crc32.Checksum(b[:32], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(protocols.HardState{}))
	f.Add(Encode(protocols.HardState{Term: 7, Vote: 3, Epoch: 7}))
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
		// Exactly one encoding per state: anything Decode accepts must be
		// what Encode would have written.
		if again := Encode(hs); !bytes.Equal(again, b) {
			t.Fatalf("Decode accepted % x, which re-encodes as % x", b, again)
		}
	})
}
