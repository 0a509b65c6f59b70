package e2e

import (
	"flag"
	"os"
	"testing"

	"github.com/conclave-agent/conclave/internal/agentbin"
)

// agentBin is the agent binary built by TestMain, without -race: the race
// detector would only slow the agents down, it cannot watch them.
var agentBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(agentbin.Main(m, "e2e", &agentBin))
}
