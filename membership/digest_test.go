package membership

import (
	"errors"
	"strings"
	"testing"
)

// A digest set at run time reaches the other members, and so does every
// later change; an oversized one is refused and leaves the last in place.
func TestSetDigestIsGossiped(t *testing.T) {
	a := start(t, testConfig("a", 1))
	b := start(t, testConfig("b", 2, a.LocalAddr()))
	a.w.until(t, "b alive", func(v map[string]Member) bool { return v["b"].State == StateAlive })
	for _, d := range []string{"majority et=1s|0.0|a,b", "majority et=1s|1.1|a,b"} {
		if err := b.SetDigest(d); err != nil {
			t.Fatal(err)
		}
		a.w.until(t, "b's digest "+d, func(v map[string]Member) bool { return v["b"].Digest == d })
	}
	if err := b.SetDigest(strings.Repeat("x", MaxDigestLen+1)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized digest: %v", err)
	}
	if err := b.SetDigest("majority et=1s|1.1|a,b"); err != nil {
		t.Errorf("the same digest again: %v", err)
	}
	b.Shutdown()
	if err := b.SetDigest("after shutdown"); err != nil {
		t.Errorf("SetDigest after Shutdown: %v (it publishes nothing, and says nothing)", err)
	}
}
