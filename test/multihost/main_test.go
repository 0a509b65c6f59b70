package multihost

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

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
	dir, err := os.MkdirTemp("", "conclave-multihost-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "multihost:", err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", agentBin, "github.com/conclave-agent/conclave/cmd/agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "multihost: building the agent:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "multihost: goroutines leaked:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// needHosts skips the test when namespaces cannot be built here.
func needHosts(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skipf("multi-host tests skipped: %s", skipReason)
	}
}
