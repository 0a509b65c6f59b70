// Command agent is the conclave daemon and its command-line client.
//
//	agent run -config FILE      run the daemon
//	agent dev [-nodes N]        run a local cluster to try failover
//	agent status | members | leader [-wait D] | watch | resign
//	agent voters [add NAME | remove NAME]
//	agent recover -config FILE -voters LIST   (offline, after losing the quorum)
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
	"strings"

	"github.com/conclave-agent/conclave/internal/suggest"
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
		{"leader", "show the leader and epoch; -wait waits for a new leader", runLeader},
		{"watch", "stream every leadership change", runWatch},
		{"resign", "ask this agent, if it leads, to hand leadership over", runResign},
		{"maint", "maint on [-reason TEXT] | off: stop or resume putting this agent forward", runMaint},
		{"voters", "list the voters; add NAME / remove NAME changes them (majority)", runVoters},
		{"recover", "offline: give a stopped agent new voters after the quorum is lost for good", runRecover},
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
// An agent's work is a few hundred tiny messages a second and a loop that
// wakes for them and for due timers; with a second P the scheduler wakes
// another thread to look for work on nearly every wake-up and every message
// (futex, epoll), which measured side by side cost a lone idle agent more
// CPU than one P (docs/benchmarks/ has the idle figures). Only `agent run`
// does this: `agent dev` runs several agents in one process, and tests call
// run in-process.
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
	fmt.Fprintf(stderr, "agent: unknown command %q", args[0])
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := suggest.Closest(args[0], names); near != "" {
		fmt.Fprintf(stderr, "; did you mean %q?", near)
	}
	fmt.Fprint(stderr, "\n\n")
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
// the command should stop (help asked, or a bad flag). -h prints every
// flag; a bad flag prints only the error, a guess at the flag meant and a
// pointer to -h, so the mistake is not scrolled away by the whole list
// (agent run has a flag per configuration key).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	full := fs.Usage
	if full == nil {
		full = func() {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	fs.Usage = func() {} // the flag package calls it on every error
	err := fs.Parse(args)
	fs.Usage = full
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		full()
		return 0, false
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := suggest.Closest(name, names); near != "" {
			fmt.Fprintf(fs.Output(), "did you mean -%s?\n", near)
		}
	}
	fmt.Fprintf(fs.Output(), "Run '%s -h' to list its flags.\n", fs.Name())
	return 2, false
}

// noArgs reports whether fs was given no arguments after its flags; if it
// was, it says so and where to find the command's usage.
func noArgs(fs *flag.FlagSet) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (flags go before arguments, as -name=value)\nRun '%s -h' to list its flags.\n", fs.Name(), fs.Arg(0), fs.Name())
	return false
}
