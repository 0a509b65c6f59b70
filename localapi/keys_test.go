package localapi

import (
	"testing"

	"github.com/conclave-agent/conclave/api"
)

// FuzzDecodeKeyChange: a key change body either fails with a bad request
// or names a known op and a key; it never panics.
func FuzzDecodeKeyChange(f *testing.F) {
	f.Add([]byte(`{"op":"install","key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Add([]byte(`{"op":"use","key":"x"}`))
	f.Add([]byte(`{"op":"remove"}`))
	f.Add([]byte(`{"op":"install","key":"k","extra":1}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c api.KeyChange
		if err := decodeKeyChange(b, &c); err != nil {
			return
		}
		switch c.Op {
		case api.KeyInstall, api.KeyUse, api.KeyRemove:
		default:
			t.Fatalf("accepted op %q", c.Op)
		}
		if c.Key == "" {
			t.Fatal("accepted a change without a key")
		}
	})
}
