// Package e2e holds black-box tests of the conclave agent: they build the
// agent binary once, start clusters of real `agent run` processes on
// loopback, talk to them over their Unix sockets with package client and
// the CLI, and fail them with real signals (SIGKILL, SIGSTOP/SIGCONT,
// SIGTERM).
//
// The package has no non-test code; run it with
//
//	go test -race ./test/e2e/
//
// Measurements (failover time per protocol, socket latency) are
// flag-gated and not run by default:
//
//	go test ./test/e2e/ -run TestMeasure -measure -v -timeout 30m
//
// Each agent's log is written to a file in the test's temporary folder and
// printed when the test fails.
package e2e
