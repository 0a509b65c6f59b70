package ring

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestGolden replays the scenarios in testdata/*.txt (testnet.RunGolden).
// Run with -rewrite to regenerate after a deliberate change, then read the
// diff: these files are the protocol's stories told step by step. The
// commands are testnet.Golden's, and:
//
//	new nodes=N [alg=lcr|hs]  N nodes n1…nN, 10 ms heartbeat, 100 ms election timeout
func TestGolden(t *testing.T) {
	testnet.RunGolden(t, func(t *testing.T, a testnet.Args) *testnet.Net[*Node] {
		return newNetwork(t, seq(a.Num(t, a.KV["nodes"])), func(c *Config) { c.Algorithm = a.KV["alg"] }).Net
	}, nil)
}
