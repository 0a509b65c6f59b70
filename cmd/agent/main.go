// Command agent is the conclave daemon and its command-line client.
//
//	agent run -config FILE      run the daemon
//	agent dev [-nodes N]        run a local cluster to try failover
//	agent status | members | leader [-wait D] | watch | resign
//	agent exec -- CMD ARGS…     run CMD only while this node leads
//	agent keygen | version
//
// Each command lives in its own file; commands are thin: parse flags, make
// one call, format the answer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
)

// command is one subcommand. run returns the process exit code; it stops
// early (as on SIGINT/SIGTERM) when ctx is cancelled.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run the agent daemon", runRun},
		{"dev", "run a small local cluster in one process to try failover", runDev},
		{"status", "show this agent's view of the election", runStatus},
		{"members", "list the members and their phi", runMembers},
		{"leader", "show the leader and epoch; -wait blocks until it changes", runLeader},
		{"watch", "stream every leadership change", runWatch},
		{"resign", "ask this agent, if it leads, to hand leadership over", runResign},
		{"exec", "run a command only while this node leads", runExec},
		{"keygen", "print a fresh cluster key for [gossip] key", runKeygen},
		{"version", "print the version", runVersion},
	}
}

func main() {
	stopProfile := func() {}
	if len(os.Args) > 1 && os.Args[1] == "run" {
		oneProcessor()
		var err error
		if stopProfile, err = startCPUProfile(); err != nil {
			fmt.Fprintf(os.Stderr, "agent: %v\n", err)
			os.Exit(1)
		}
	}
	code := dispatch(os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// oneProcessor runs the daemon on one P unless GOMAXPROCS says otherwise.
// An agent's work is a few hundred tiny messages and a hundred loop ticks a
// second; with a second P the scheduler wakes another thread to look for
// work on nearly every tick and every message (futex, epoll): a lone idle
// agent used 1.25 % of a core with two Ps and 0.97 % with one, measured
// side by side. Only `agent run` does this: `agent dev` runs several
// agents in one process, and tests call run in-process.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// dispatch runs the command args name and returns the exit code.
func dispatch(args []string, stdout, stderr io.Writer) int {
	return dispatchContext(context.Background(), args, stdout, stderr)
}

// dispatchContext is dispatch for a command that ctx can stop (tests stop
// long-running commands — run, dev, watch, exec — this way; the CLI uses
// signals, which every command also watches).
func dispatchContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "agent: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agent <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'agent <command> -h' for a command's flags.")
}

// parseFlags parses args with fs; it returns an exit code and false when
// the command should stop (help asked, or a bad flag).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// noArgs reports whether fs was given no arguments after its flags; if it
// was, it says so and prints the command's usage.
func noArgs(fs *flag.FlagSet) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
	fs.Usage()
	return false
}
