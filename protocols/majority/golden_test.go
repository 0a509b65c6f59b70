package majority

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// TestGolden replays the scenarios in testdata/*.txt (testnet.RunGolden).
// Run with -rewrite to regenerate after a deliberate change, then read the
// diff: these files are the protocol's stories told step by step. The
// commands are testnet.Golden's, and:
//
//	new voters=N [observers=N] [seed=N] [prevote=false] [checkquorum=false]
//	until-leader max=DUR    advance until some node leads
//	crash N                 stop N; nobody is told
//	restart N               start N from its disk; nobody is told
//	campaign N...           make the nodes campaign together
//	stall for=DUR N...      freeze the nodes' processes for DUR: they do
//	                        not tick, messages to them wait; then each
//	                        ticks at once, in order, and steps what waited
func TestGolden(t *testing.T) {
	var tn *testNet
	testnet.RunGolden(t, func(t *testing.T, a testnet.Args) *testnet.Net[*Node] {
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
		return tn.Net
	}, func(t *testing.T, _ *testnet.Net[*Node], d *datadriven.TestData, a testnet.Args) (string, bool) {
		switch d.Cmd {
		case "until-leader":
			l, took := tn.runUntilLeader(a.Dur(t, a.KV["max"]))
			return tn.TakeEvents() + fmt.Sprintf("leader n%d after %v\n", l, took), true
		case "crash":
			tn.crash(a.ID(t, 0))
			return "", true
		case "restart":
			tn.start(a.ID(t, 0))
			return tn.TakeEvents(), true
		case "stall":
			ids := make([]protocols.ID, len(a.Pos))
			for i := range a.Pos {
				ids[i] = a.ID(t, i)
			}
			tn.stall(a.Dur(t, a.KV["for"]), ids)
			return tn.TakeEvents(), true
		case "campaign":
			// Force simultaneous campaigns, as if the timeouts expired
			// together.
			for i := range a.Pos {
				id := a.ID(t, i)
				tn.Nodes[id].campaign(tn.Now, false)
				tn.Drain(id)
			}
			tn.Deliver()
			return tn.TakeEvents(), true
		}
		return "", false
	})
}
