package membership

import (
	"bytes"
	"testing"
)

// A rotation through SetKeys: members keep gossiping while they share a
// key, whatever their primaries; a joiner holding only a removed key is
// kept out.
func TestSetKeysRotates(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	c1 := testConfig("n1", 1)
	c1.Keys = [][]byte{old}
	n1 := start(t, c1)
	c2 := testConfig("n2", 2, n1.LocalAddr())
	c2.Key = old
	n2 := start(t, c2)
	n2.w.until(t, "n2 joins with the old key", func(view map[string]Member) bool { return isAlive(view, "n1") && isAlive(view, "n2") })

	// Install everywhere, then n1 uses the new key while n2 still
	// encrypts with the old one.
	for _, n := range []*node{n1, n2} {
		if err := n.SetKeys([][]byte{old, next}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n1.SetKeys([][]byte{next, old}); err != nil {
		t.Fatal(err)
	}
	// Then the old key goes everywhere.
	for _, n := range []*node{n1, n2} {
		if err := n.SetKeys([][]byte{next}); err != nil {
			t.Fatal(err)
		}
	}
	// A joiner with only the old key is kept out; one with the new key
	// gets in: the cluster now speaks only the new key.
	c3 := testConfig("n3", 3, n1.LocalAddr())
	c3.Keys = [][]byte{old}
	n3 := start(t, c3)
	c4 := testConfig("n4", 4, n1.LocalAddr())
	c4.Keys = [][]byte{next}
	n4 := start(t, c4)
	n4.w.until(t, "n4 joins with the new key", func(view map[string]Member) bool {
		return isAlive(view, "n1") && isAlive(view, "n2") && isAlive(view, "n4")
	})
	if ms := n3.Members(); len(ms) != 1 {
		t.Errorf("n3, holding only the removed key, sees %d members", len(ms))
	}
	for _, n := range []*node{n1, n2, n4} {
		for _, m := range n.Members() {
			if m.Name == "n3" {
				t.Errorf("%s lists n3, which holds only the removed key", n.name)
			}
		}
	}

	// A member that never had a key cannot start encrypting.
	plain := start(t, testConfig("n5", 5))
	if err := plain.SetKeys([][]byte{next}); err == nil {
		t.Error("SetKeys on a member started without a key succeeded")
	}
}
