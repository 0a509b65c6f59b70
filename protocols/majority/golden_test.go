package majority

import (
	"fmt"
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
//	new voters=N [observers=N] [seed=N] [prevote=false] [checkquorum=false]
//	until-leader max=DUR    advance until some node leads
//	crash N                 stop N; nobody is told
//	restart N               start N from its disk; nobody is told
//	campaign N...           make the nodes campaign together
func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var tn *testNet
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := testnet.ParseArgs(d)
			if d.Cmd == "new" {
				cfg := baseConfig()
				cfg.PreVote = a.KV["prevote"] != "false"
				cfg.CheckQuorum = a.KV["checkquorum"] != "false"
				observers, seed := 0, uint64(1)
				if o, ok := a.KV["observers"]; ok {
					observers = a.Num(t, o)
				}
				if s, ok := a.KV["seed"]; ok {
					seed = uint64(a.Num(t, s))
				}
				tn = newTestNet(a.Num(t, a.KV["voters"]), observers, seed, cfg)
				return tn.TakeEvents()
			}
			if tn == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			switch d.Cmd {
			case "until-leader":
				l, took := tn.runUntilLeader(a.Dur(t, a.KV["max"]))
				return tn.TakeEvents() + fmt.Sprintf("leader n%d after %v\n", l, took)
			case "crash":
				tn.crash(a.ID(t, 0))
				return "ok"
			case "restart":
				tn.start(a.ID(t, 0))
				return orOK(tn.TakeEvents())
			case "campaign":
				// Force simultaneous campaigns, as if the timeouts expired
				// together.
				for i := range a.Pos {
					id := a.ID(t, i)
					tn.Nodes[id].campaign(tn.Now, false)
					tn.Drain(id)
				}
				tn.Deliver()
				return orOK(tn.TakeEvents())
			}
			out, ok := testnet.Golden(t, tn.Net, d)
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
