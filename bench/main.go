// Command bench measures conclave the way an operator choosing an election
// tool would: real agent processes on loopback, SIGKILLed leaders, planned
// handovers, steady state under jitter, idle cost, socket latency, scale,
// and the same failover measurement for etcd's election recipe, in one run
// on one machine. It writes a Markdown report with SVG plots.
//
//	bash scripts/bench                 # full report into docs/benchmarks/
//	bash scripts/bench -quick          # a small smoke run of every part
//
// It lives in its own module so etcd's dependencies stay out of the agent's
// go.mod. It never imports the agent's packages: it drives built binaries
// through their documented interfaces (flags, the Unix socket, signals), as
// a user would.
package main

import (
	"fmt"
	"os"
)

// subcommands are the internal roles the bench binary plays when it starts
// itself as a child process (an etcd member, a campaigner, …). The default,
// with no subcommand, is the benchmark run.
var subcommands = map[string]func(args []string) error{}

func main() {
	if len(os.Args) > 1 {
		if f, ok := subcommands[os.Args[1]]; ok {
			if err := f(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	if err := runBench(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}
