package membership

import (
	"errors"
	"strings"
	"testing"
)

// A digest and its extension set at run time reach the other members,
// and so does every later change; an oversized one is refused and leaves
// the last in place.
func TestSetDigestIsGossiped(t *testing.T) {
	a := start(t, testConfig("a", 1))
	b := start(t, testConfig("b", 2, a.LocalAddr()))
	a.w.until(t, "b alive", func(v map[string]Member) bool { return v["b"].State == StateAlive })
	for _, d := range [][2]string{
		{"majority et=1s|0.0|a,b", ""},
		{"majority et=1s|1.1|a,b", ""},
		{"majority et=1s|1.1|a,b", "pv=1 cq=1"},
		{"majority et=1s|1.2|a,b", "pv=0 cq=1"},
	} {
		if err := b.SetDigest(d[0], d[1]); err != nil {
			t.Fatal(err)
		}
		a.w.until(t, "b's digest "+d[0]+" "+d[1], func(v map[string]Member) bool {
			return v["b"].Digest == d[0] && v["b"].DigestExt == d[1]
		})
	}
	if err := b.SetDigest(strings.Repeat("x", MaxDigestLen+1), ""); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized digest: %v", err)
	}
	if err := b.SetDigest("d", strings.Repeat("x", MaxDigestExtLen+1)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized extension: %v", err)
	}
	if err := b.SetDigest("majority et=1s|1.2|a,b", "pv=0 cq=1"); err != nil {
		t.Errorf("the same digest again: %v", err)
	}
	b.Shutdown()
	if err := b.SetDigest("after shutdown", ""); err != nil {
		t.Errorf("SetDigest after Shutdown: %v (it publishes nothing, and says nothing)", err)
	}
}
