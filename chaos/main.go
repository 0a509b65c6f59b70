// Command chaos runs real agent processes and the fenced scheduler example
// (examples/scheduler) under a seeded nemesis — SIGKILL, SIGSTOP, and, as
// root with ip and iptables, network partitions and loss inside network
// namespaces of its own — records what every agent and replica said and
// did, and every request a client made of an agent with its call and
// return times, in a JSONL history, and checks it: at most one leader per
// epoch, epochs and terms never going back, one vote per term, no stale or
// duplicate job ever accepted, a leader again within a bound after every
// heal, leader reads and the fence table linearizable (porcupine), and no
// two agents' leases overlapping.
//
//	go run ./chaos -seed 1 -rounds 200          # a long run
//	go run ./chaos -seed 1 -rounds 20 -control  # fencing off: must find violations
//	go run ./chaos -rounds 4 -planted           # a too-long lease: must find overlaps
//
// It exits 0 when the run is clean (a control run: when it found the bug),
// 1 when it is not, 2 on a harness error. docs/chaos.md has the details.
//
// The harness must never touch the host's own network: agents listen on
// loopback, or on 192.168.78.0/24 inside the namespaces it creates (prefix
// cvchaos-, removed on exit and at start).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(chaosMain(os.Args[1:], os.Stdout, os.Stderr))
}

func chaosMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt Options
	seed := fs.Uint64("seed", 1, "seed of the nemesis: same seed, same choice of faults")
	fs.IntVar(&opt.Rounds, "rounds", 20, "nemesis rounds")
	fs.IntVar(&opt.Nodes, "nodes", 3, "agents (3 to 5)")
	fs.BoolVar(&opt.Control, "control", false, "control run: schedulers without the fencing check and the UNIQUE key; the checker must find violations")
	fs.BoolVar(&opt.Planted, "planted", false, "planted-bug run: build the agent with -tags conclave_unsafe (majority's LeaseTooLong); the checker must find overlapping leases")
	fs.StringVar(&opt.Netns, "netns", "auto", "network faults in namespaces: auto (when root with ip and iptables) or off")
	fs.DurationVar(&opt.Freeze, "freeze", 30*time.Second, "one round freezes the leader's scheduler and agent this long (0: none)")
	schedule := fs.String("schedule", "", "comma-separated fault kinds to run in order instead of drawing them")
	fs.DurationVar(&opt.ElectionTimeout, "election-timeout", 0, "agents' election.election_timeout (0: the shipped default)")
	fs.DurationVar(&opt.Heartbeat, "heartbeat", 0, "agents' detector.heartbeat_interval (0: the shipped default)")
	fs.DurationVar(&opt.Bound, "bound", 20*time.Second, "liveness bound: a leader within this after every heal")
	fs.StringVar(&opt.Dir, "dir", "", "working directory (default: a new temporary one, kept for reading)")
	fs.StringVar(&opt.BinDir, "bin", "", "folder with prebuilt agent and scheduler binaries (default: build them into the working directory)")
	recheck := fs.String("check", "", "only check the run kept in this -dir folder again (history.jsonl and jobs.db)")
	summary := fs.String("summary", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opt.Seed = *seed
	opt.Out = stdout
	if *schedule != "" {
		opt.Schedule = strings.Split(*schedule, ",")
	}
	if opt.Nodes < 3 || opt.Nodes > 5 {
		fmt.Fprintln(stderr, "chaos: -nodes must be 3, 4 or 5")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *recheck != "" {
		rep, err := CheckDir(ctx, *recheck, opt.Bound)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		rep.Print(stdout)
		if len(rep.Violations) > 0 {
			return 1
		}
		return 0
	}
	res, err := Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintf(stdout, "\nrun took %s; history %s; jobs %s\n", res.Duration.Round(time.Second), res.History, res.DB)
	res.Report.Print(stdout)
	if *summary != "" {
		b, _ := json.MarshalIndent(res.Report, "", "  ")
		if err := os.WriteFile(*summary, b, 0o644); err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 2
		}
	}
	clean := len(res.Report.Violations) == 0
	if opt.Planted {
		if res.Report.Ops.LeaseOverlaps == 0 {
			fmt.Fprintln(stdout, "PLANTED BUG MISSED: the agent's lease was too long, yet no two leases overlapped — the lease check cannot see the bug")
			return 1
		}
		fmt.Fprintln(stdout, "planted run: the checker sees the too-long lease (as it must)")
		return 0
	}
	if opt.Control {
		if clean {
			fmt.Fprintln(stdout, "CONTROL FAILED: fencing off, yet no stale or duplicate job was seen — the test cannot see the bug")
			return 1
		}
		fmt.Fprintln(stdout, "control run: the checker sees the bug when fencing is off (as it must)")
		return 0
	}
	if !clean {
		return 1
	}
	return 0
}
