// Package agentbin builds the agent binary for test packages that run real
// agent processes (test/e2e, test/multihost), so each does not carry its own
// copy of the build, the leak check and the clean-up. It is for tests only
// and must never be imported by the agent itself.
package agentbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Main is the body of a TestMain: it builds ./cmd/agent without -race (the
// race detector would only slow the agents down; it cannot watch another
// process) into a temporary directory, stores the binary's path in *bin,
// runs the tests, fails the run if goroutines leaked, removes the build and
// returns the exit code. name prefixes its messages.
func Main(m *testing.M, name string, bin *string) int {
	dir, err := os.MkdirTemp("", "conclave-"+name+"-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", *bin, "github.com/conclave-agent/conclave/cmd/agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: building the agent: %v\n", name, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: goroutines leaked: %v\n", name, err)
			code = 1
		}
	}
	return code
}
