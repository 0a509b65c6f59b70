package ring

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestGolden replays the scenarios in testdata/*.txt (datadriven files: a
// command line, "----" and the expected output). Run with -rewrite to
// regenerate after a deliberate change, then read the diff: these files are
// the protocol's stories told step by step. The commands are
// testnet.Golden's, and:
//
//	new nodes=N [alg=lcr|hs]  N nodes n1…nN, 10 ms heartbeat, 100 ms election timeout
//	campaign N...             make the nodes start an election together
func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var nw *network
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := testnet.ParseArgs(d)
			if d.Cmd == "new" {
				cfg := func(c *Config) { c.Algorithm = a.KV["alg"] }
				nw = newNetwork(t, seq(a.Num(t, a.KV["nodes"])), cfg)
				nw.Collect()
				return orOK(nw.TakeEvents())
			}
			if nw == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			if d.Cmd == "campaign" {
				for i := range a.Pos {
					nw.Nodes[a.ID(t, i)].Campaign(nw.Now)
				}
				nw.Deliver()
				return orOK(nw.TakeEvents())
			}
			out, ok := testnet.Golden(t, nw.Net, d)
			if !ok {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return out
		})
	})
}

// orOK stands for empty output in the golden files.
func orOK(out string) string {
	if out == "" {
		return "ok"
	}
	return out
}
