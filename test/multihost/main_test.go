package multihost

import (
	"flag"
	"os"
	"testing"

	"github.com/conclave-agent/conclave/internal/agentbin"
	"github.com/conclave-agent/conclave/internal/netns"
)

// agentBin is the agent binary built by TestMain, without -race: the race
// detector would only slow the agents down, it cannot watch them. Empty
// when namespaces are unavailable (every test skips).
var agentBin string

// skipReason is why the tests skip, or "".
var skipReason string

func TestMain(m *testing.M) {
	flag.Parse()
	if ok, why := netns.Available(); !ok {
		skipReason = why
		os.Exit(m.Run())
	}
	if bin := os.Getenv("CONCLAVE_MULTIHOST_AGENT"); bin != "" {
		// Another build (an older commit, to show a test failing before
		// a fix).
		agentBin = bin
		os.Exit(m.Run())
	}
	os.Exit(agentbin.Main(m, "multihost", &agentBin))
}

// needHosts skips the test when namespaces cannot be built here.
func needHosts(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skipf("multi-host tests skipped: %s", skipReason)
	}
}
