package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// agentBin is the agent binary built by TestMain, without -race: the race
// detector would only slow the agents down, it cannot watch them.
var agentBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "conclave-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", agentBin, "github.com/conclave-agent/conclave/cmd/agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the agent:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutines leaked:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
