package ring

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestGolden replays the scenarios in testdata/*.txt (testnet.RunGolden).
// Run with -rewrite to regenerate after a deliberate change, then read the
// diff: these files are the protocol's stories told step by step. The
// commands are testnet.Golden's, and:
//
//	new nodes=N [alg=lcr|hs|peterson] [prio=(ID:P,...)] [delay=DUR]
//	                          N nodes n1…nN, 10 ms heartbeat, 100 ms election
//	                          timeout, the given priorities and preempt delay
func TestGolden(t *testing.T) {
	testnet.RunGolden(t, func(t *testing.T, a testnet.Args) *testnet.Net[*Node] {
		prio := a.Priorities(t)
		var delay time.Duration
		if d, ok := a.KV["delay"]; ok {
			delay = a.Dur(t, d)
		}
		ids := seq(a.Num(t, a.KV["nodes"]))
		nw := newNetwork(t, ids, func(c *Config) {
			c.Algorithm = a.KV["alg"]
			c.Members = testnet.MembersWith(ids, prio)
			c.Candidacy.Priority = prio[c.ID]
			c.PreemptDelay = delay
		}).Net
		nw.Priorities = prio
		return nw
	}, nil)
}
