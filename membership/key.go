package membership

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"
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

// KeyRefused returns, sorted, the names of the members declared dead
// whose gossip failed for want of a shared key at the last attempt to
// reach them again, within window. Nothing else names such a member: it
// cannot join, and gossip reports it only as dead. It drops out once
// reached again, alive by any path, or reaped.
func (m *Membership) KeyRefused(window time.Duration) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name, at := range m.keyRefused {
		if mb, ok := m.members[name]; ok && mb.State == StateDead && time.Since(at) <= window {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// noteKeyRefused records whether the last attempt to reach member name
// again failed because no key was shared. Entries go when the member is
// reaped, so the map stays bounded by the dead members kept.
func (m *Membership) noteKeyRefused(name string, refused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !refused {
		delete(m.keyRefused, name)
		return
	}
	if m.keyRefused == nil {
		m.keyRefused = make(map[string]time.Time)
	}
	m.keyRefused[name] = time.Now()
}

// isKeyMismatch reports whether err is memberlist's for gossip that no
// installed key decrypts, or encryption on one side only. Memberlist has
// no typed errors for these; its messages are matched case-insensitively.
func isKeyMismatch(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "could decrypt") || strings.Contains(msg, "encryption is configured") ||
		strings.Contains(msg, "encryption is not configured")
}
