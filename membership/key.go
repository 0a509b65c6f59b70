package membership

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// KeySize is the size in bytes of keys made by GenerateKey (AES-256).
const KeySize = 32

// GenerateKey returns a new random 32-byte gossip key in standard base64,
// the form the [gossip] key setting takes ("agent keygen").
func GenerateKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("membership: generate key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ParseKey decodes a gossip key: standard base64 of 16, 24 or 32 bytes
// (AES-128, -192 or -256). An empty string is an error; callers treat "no
// key configured" before calling.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("membership: gossip key is empty")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("membership: gossip key is not valid base64 (generate one with \"agent keygen\"): %w", err)
	}
	if err := checkKeyLen(len(b)); err != nil {
		return nil, err
	}
	return b, nil
}

func checkKeyLen(n int) error {
	switch n {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("membership: gossip key decodes to %d bytes, want 16, 24 or 32 (generate one with \"agent keygen\")", n)
}

// SetKeys makes keys (primary first) the installed gossip keys at run
// time: the new primary is installed first and used, then every key not
// in keys is removed, so a packet in flight under any key that stays is
// still read. It is an error on a member started without a key: gossip
// cannot be encrypted after the fact.
func (m *Membership) SetKeys(keys [][]byte) error {
	kr := m.keyring
	if kr == nil || len(kr.GetKeys()) == 0 {
		return fmt.Errorf("membership: this member gossips without a key; set gossip.key and restart every member to encrypt")
	}
	if len(keys) == 0 {
		return fmt.Errorf("membership: refusing to remove every key")
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("membership: install key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("membership: use key: %w", err)
	}
	for _, k := range kr.GetKeys() {
		if !slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) }) {
			if err := kr.RemoveKey(k); err != nil {
				return fmt.Errorf("membership: remove key: %w", err)
			}
		}
	}
	return nil
}
