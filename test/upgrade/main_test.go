package upgrade

import (
	"flag"
	"os"
	"testing"

	"github.com/conclave-agent/conclave/internal/agentbin"
)

// treeBin is the tree's agent binary, built by TestMain without -race: the
// race detector would only slow the agents down, it cannot watch them.
var treeBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(agentbin.Main(m, "upgrade", &treeBin))
}
