package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/membership"
)

func TestKeygen(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		code, stdout, stderr := cli(t, "keygen")
		if code != 0 || stderr != "" || !strings.HasSuffix(stdout, "\n") {
			t.Fatalf("agent keygen: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		key := strings.TrimSuffix(stdout, "\n")
		b, err := base64.StdEncoding.DecodeString(key)
		if err != nil || len(b) != 32 {
			t.Fatalf("agent keygen printed %q: %d bytes, %v; want base64 of 32 bytes", key, len(b), err)
		}
		if seen[key] {
			t.Fatalf("agent keygen printed %q twice", key)
		}
		seen[key] = true
	}
	// The key is one [gossip] key accepts.
	for key := range seen {
		if _, err := membership.ParseKey(key); err != nil {
			t.Errorf("the keygen key %q is refused as gossip.key: %v", key, err)
		}
	}
}
