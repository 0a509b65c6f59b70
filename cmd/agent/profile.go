package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// cpuProfileEnv names a file to which `agent run` writes a CPU profile of
// its whole life, for finding where an agent's cycles go (docs/benchmarks/
// analysis.md). It is a debugging aid, not a setting: the profile is
// written when the daemon stops cleanly (SIGINT or SIGTERM), not on
// SIGKILL.
const cpuProfileEnv = "CONCLAVE_CPUPROFILE"

// startCPUProfile starts the CPU profile cpuProfileEnv asks for, if any,
// and returns the function that stops it and closes the file.
func startCPUProfile() (stop func(), err error) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// traceEnv names a file to which `agent run` writes a Go execution trace
// of its whole life, for finding what wakes an idle agent (bench/cmd/wakes
// counts the wake-ups by cause). Like cpuProfileEnv it is a debugging
// aid, written when the daemon stops cleanly; a trace grows by about
// 20 KB a second on an idle voter.
const traceEnv = "CONCLAVE_TRACE"

// startTrace starts the execution trace traceEnv asks for, if any, and
// returns the function that stops it and closes the file.
func startTrace() (stop func(), err error) {
	path := os.Getenv(traceEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", traceEnv, err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", traceEnv, err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}
