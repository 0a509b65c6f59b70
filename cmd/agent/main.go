// Command agent is the conclave daemon and its command-line client.
//
//	agent run -config FILE      run the daemon
//	agent dev [-nodes N]        run a local cluster to try failover
//	agent status | members [-v] | leader [-wait D] | watch | resign
//	agent elections             list the elections this agent runs
//	agent tune [-config FILE]   recommend timings from measured gaps
//	agent voters [add NAME | remove NAME]
//	agent recover -config FILE -voters LIST   (offline, after losing the quorum)
//	agent exec -- CMD ARGS…     run CMD only while this node leads
//	agent keygen | version
//	agent completion bash|zsh|fish | man -dir DIR
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
	"text/tabwriter"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/internal/suggest"
)

// command is one subcommand. run returns the process exit code; it stops
// early (as on SIGINT/SIGTERM) when ctx is cancelled.
//
// Every command follows one convention, which parseArgs and printHelp
// carry out so that no command has to: flags may come before, between or
// after the other words; -h, -help, --help and `agent help NAME` print the
// help below on stdout and exit 0; a mistake goes to stderr with exit 2
// and names what would have been valid.
type command struct {
	name    string
	summary string // one line, for the command list
	// usage is what follows "agent NAME" in the help's synopsis, one
	// string per form ("[flags]", "[flags] add NAME").
	usage []string
	// about says what the command does, in a few lines.
	about string
	// example is one or more command lines, shown under "example:".
	example []string
	// commandLine marks a command whose words are a command line of
	// their own (exec): its flags end at the first word or "--", so the
	// command's own flags are left alone.
	commandLine bool
	// words are the fixed words the command takes first ("on", "off"),
	// offered by shell completion; nil when it takes none or free ones.
	words []string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{name: "run", summary: "run the agent daemon", run: runRun,
			usage:   []string{"-config FILE [-section.key=value …]"},
			about:   "Runs the agent until SIGINT or SIGTERM. Every configuration key has a flag,\nwhich overrides the file (lists are comma-separated: -election.voters=n1,n2,n3).",
			example: []string{"agent run -config config.example.toml -node.data_dir=data/cluster/n1 -election.voters=n1,n2,n3"}},
		{name: "dev", summary: "run a small local cluster in one process to try failover", run: runDev,
			usage:   []string{"[-nodes N] [-protocol majority|bully|ring] [-dir D] [-v]"},
			about:   "Runs N agents on loopback in this process and reads commands (kill, stop,\nstart, resign, quit) from standard input.",
			example: []string{"agent dev -nodes 3 -dir data/dev"}},
		{name: "status", summary: "show this agent's view of the election", run: runStatus,
			usage:   []string{"[-consistent] [-election NAME] [-json] [-socket PATH]"},
			about:   "Prints the role, leader, epoch, lease, members and quorum this agent sees.",
			example: []string{"agent status -socket data/cluster/n1/agent.sock"}},
		{name: "elections", summary: "list the elections this agent runs, with each one's leader", run: runElections,
			usage: []string{"[-json] [-socket PATH]"},
			about: "Lists every election this agent runs: the [election] table is \"default\", each\n" +
				"[elections.NAME] table is NAME. Client commands act on one with -election NAME.",
			example: []string{"agent elections -socket data/cluster/n1/agent.sock"}},
		{name: "members", summary: "list the members and their phi", run: runMembers,
			usage:   []string{"[-v] [-json] [-socket PATH]"},
			about:   "Lists every member gossip knows, its state and the phi this agent computes for it;\n-v adds the gaps between its heartbeats as this agent received them.",
			example: []string{"agent members -socket data/cluster/n1/agent.sock"}},
		{name: "tune", summary: "recommend timings from the heartbeat gaps this agent measured", run: runTune,
			usage: []string{"[-config FILE] [-target N] [-json] [-socket PATH]"},
			about: "Reads the heartbeat gaps this agent measured (agent members -v), judges the\n" +
				"timings in force (-config, else the defaults) and recommends a phi threshold and\n" +
				"an election timeout whose predicted false alarms stay within -target a day per\n" +
				"member, with the failover time they imply. Run it on the leader.",
			example: []string{"agent tune -config /etc/conclave/agent.toml -socket /run/conclave/agent.sock"}},
		{name: "leader", summary: "show the leader and epoch; -wait waits for a new leader", run: runLeader,
			usage:   []string{"[-wait D [-index E]] [-election NAME] [-json] [-socket PATH]"},
			about:   "Prints the leader and its epoch; with -wait, first waits up to D for a leader\nin an epoch above -index (default: the current one).",
			example: []string{"agent leader -wait 30s -socket data/cluster/n1/agent.sock"}},
		{name: "watch", summary: "stream every leadership change", run: runWatch,
			usage:   []string{"[-election NAME] [-json] [-socket PATH]"},
			about:   "Prints the current state, then one line per change, until Ctrl-C.",
			example: []string{"agent watch -socket data/cluster/n1/agent.sock"}},
		{name: "resign", summary: "ask this agent, if it leads, to hand leadership over", run: runResign,
			usage:   []string{"[-election NAME] [-json] [-socket PATH]"},
			about:   "Hands leadership over to another node; refused (exit 1) if this agent does not lead.",
			example: []string{"agent resign -socket data/cluster/n1/agent.sock"}},
		{name: "maint", summary: "maint on [-reason TEXT] | off: stop or resume putting this agent forward", run: runMaint,
			words:   []string{"on", "off"},
			usage:   []string{"on [-reason TEXT] [flags]", "off [flags]"},
			about:   "on: this agent stops putting itself forward and hands leadership over if it\nleads, until off; kept across restarts (docs/health.md).",
			example: []string{"agent maint on -reason 'kernel upgrade' -socket data/cluster/n1/agent.sock"},
		},
		{name: "voters", summary: "list the voters; add NAME / remove NAME changes them (majority)", run: runVoters,
			words: []string{"add", "remove"},
			usage: []string{"[flags]              list the committed voters (and a pending change)",
				"add NAME [flags]     make member NAME a voter",
				"remove NAME [flags]  make voter NAME an observer"},
			about:   "A change waits until a majority of the new voter set has it; run it on any agent.",
			example: []string{"agent voters add n4 -socket data/cluster/n1/agent.sock"},
		},
		{name: "recover", summary: "offline: give a stopped agent new voters after the quorum is lost for good", run: runRecover,
			usage:   []string{"-config FILE -voters n3,n4,n5 [-term N]", "-data-dir DIR -voters n3,n4,n5 [-term N]"},
			about:   "Rewrites a STOPPED majority agent's voter set after the quorum is lost for good.\nUnsafe if a member left out comes back with its data: wipe theirs first.",
			example: []string{"agent recover -config n3.toml -voters n3,n4,n5"}},
		{name: "exec", summary: "run a command only while this node leads", run: runExec,
			usage: []string{"[-grace D] [-quiet] [-election NAME] [-socket PATH] [--] CMD [ARGS…]"},
			about: "Runs CMD only while this node leads (the election -election names), with\n" +
				"CONCLAVE_EPOCH, CONCLAVE_LEADER and CONCLAVE_ELECTION set; stops it at once\n" +
				"(SIGTERM, then SIGKILL after -grace) on loss of leadership or of the agent.\n" +
				"On an election with candidacy = \"session\" it holds a session while CMD runs,\n" +
				"and with session_ttl relays CMD's WATCHDOG=1 on $NOTIFY_SOCKET as check-ins.\n" +
				"Reports on stderr what it waits for. exec's flags go before CMD.",
			example:     []string{"agent exec -socket data/cluster/n1/agent.sock -- ./scheduler -once"},
			commandLine: true},
		{name: "keys", summary: "list, install, use or remove the cluster keys on every member (rotation)", run: runKeys,
			usage: []string{"[list] [flags]         every key, [members holding it/members], the primary marked",
				"install KEY [flags]    add KEY (gossip is read with any installed key)",
				"use KEY [flags]        encrypt gossip with KEY from now on",
				"remove KEY [flags]     drop KEY: peers that hold only it are refused"},
			about: "One step of a key rotation, run by the agent behind the socket on every member\n" +
				"through gossip; prints [acknowledged/members] and names each member that did\n" +
				"not, and exits 1 then: run the step again once it is back (docs/security.md).\n" +
				"use and remove check every member first; -force goes on past members down or\n" +
				"silent. -local acts on this agent only. Needs write permission.",
			example: []string{"agent keys install $(agent keygen) -socket data/cluster/n1/agent.sock"},
		},
		{name: "keygen", summary: "print a fresh cluster key for [gossip] key", run: runKeygen,
			usage:   []string{""},
			about:   "Prints a fresh random cluster key (base64 of 32 bytes) for [gossip] key.",
			example: []string{"agent keygen"}},
		{name: "version", summary: "print the version, commit and Go version", run: runVersion,
			usage:   []string{"[-json]"},
			about:   "Prints the agent's version, the commit it was built from and whether that\ntree had uncommitted changes, and the Go version and platform.",
			example: []string{"agent version -json"}},
		{name: "completion", summary: "print a shell completion script: bash, zsh or fish", run: runCompletion,
			usage: []string{"bash|zsh|fish"},
			words: completionShells,
			about: "Prints a completion script for every command and flag. Load it with\n" +
				"  source <(agent completion bash)\n" +
				"or install it where the shell looks (the Debian package does).",
			example: []string{"agent completion bash > /etc/bash_completion.d/agent"}},
		{name: "man", summary: "write the man pages: agent(1) and agent-NAME(1) per command", run: runMan,
			usage:   []string{"-dir DIR"},
			about:   "Writes agent.1 and one agent-NAME.1 per command into DIR, from the same\ncommand table as the help and the completions.",
			example: []string{"agent man -dir dist/man"}},
	}
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func main() {
	stopProfile, stopTrace := func() {}, func() {}
	if len(os.Args) > 1 && os.Args[1] == "run" {
		oneProcessor()
		var err error
		if stopProfile, err = startCPUProfile(); err != nil {
			fmt.Fprintf(os.Stderr, "agent: %v\n", err)
			os.Exit(1)
		}
		if stopTrace, err = startTrace(); err != nil {
			stopProfile()
			fmt.Fprintf(os.Stderr, "agent: %v\n", err)
			os.Exit(1)
		}
	}
	code := dispatch(os.Args[1:], os.Stdout, os.Stderr)
	stopTrace()
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
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		return help(ctx, args[1:], stdout, stderr)
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		// agent -socket S status: the flags belong to the command.
		for i, a := range args {
			if c, ok := lookup(a); ok && i > 0 {
				rest := append(append([]string{c.name}, args[:i]...), args[i+1:]...)
				fmt.Fprintf(stderr, "agent: flags go after the command's name, as in: agent %s\n", strings.Join(rest, " "))
				return 2
			}
		}
	}
	fmt.Fprintf(stderr, "agent: unknown command %q", args[0])
	if near := suggest.Closest(args[0], commandNames()); near != "" {
		fmt.Fprintf(stderr, "; did you mean %q?", near)
	}
	fmt.Fprint(stderr, "\n\n")
	usage(stderr)
	return 2
}

// help is `agent help [NAME]`: the command list, or NAME's help, on stdout.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintf(stderr, "agent help: expected one command's name, got %q\n", strings.Join(args, " "))
		return 2
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "agent help: unknown command %q; the commands are %s\n", args[0], strings.Join(commandNames(), ", "))
		return 2
	}
	// The command prints its own help: only it knows its flags.
	return c.run(ctx, []string{"-h"}, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agent <command> [flags] [words]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'agent help <command>' (or 'agent <command> -h') for its flags and an example.")
	fmt.Fprintf(w, "Client commands find the agent's socket with -socket PATH, else $%s, else %s.\n", api.EnvSocket, api.DefaultSocket)
	fmt.Fprintln(w, "Those that act on one election (status, leader, watch, resign, maint, voters, exec)")
	fmt.Fprintln(w, "take -election NAME; without it, the default election ([election]).")
}

// newFlagSet returns the flag set of command name. Errors go to stderr;
// parseArgs prints help on stdout.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // the flag package calls it on every error; parseArgs says more
	return fs
}

// parseArgs parses args with fs, the flag set of a command of the table,
// and returns the words that are not flags. Flags may come before, between
// or after the words; "--" ends the flags (every later argument is a word),
// and so does the first word for a commandLine command. ok is false when
// the command should stop, with its exit code: help was asked (printed on
// stdout, 0), or a flag was bad (stderr, 2). A bad flag prints only the
// error, a guess at the flag meant and a pointer to -h, so the mistake is
// not scrolled away by the whole list (agent run has a flag per
// configuration key).
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) (words []string, code int, ok bool) {
	name := strings.TrimPrefix(fs.Name(), "agent ")
	c, _ := lookup(name)
	var err error
	for {
		if err = fs.Parse(args); err != nil {
			break
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// Parse stops at the first word, or just after "--".
		if i := len(args) - len(rest); c.commandLine || (i > 0 && args[i-1] == "--") {
			words = append(words, rest...)
			break
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
	if err == nil {
		return words, 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		if sink, ok := stdout.(*flagSink); ok {
			sink.fs = fs // commandFlags asked for the flags, not the help
			return nil, 0, false
		}
		printHelp(stdout, c, fs)
		return nil, 0, false
	}
	if bad, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := suggest.Closest(strings.TrimPrefix(bad, "-"), names); near != "" {
			fmt.Fprintf(fs.Output(), "did you mean -%s?\n", near)
		}
	}
	fmt.Fprintf(fs.Output(), "Run '%s -h' to list its flags.\n", fs.Name())
	return nil, 2, false
}

// printHelp writes command c's help: synopsis, what it does, its flags
// with their defaults, an example. Every command's help has this layout.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	for i, u := range c.usage {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintln(w, strings.TrimRight(lead+"agent "+c.name+" "+u, " "))
	}
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	var rows [][2]string
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		left := "-" + f.Name
		if arg != "" {
			left += " " + arg
		}
		if !zeroDefault(f) {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		rows = append(rows, [2]string{left, text})
	})
	if len(rows) > 0 {
		fmt.Fprintln(w, "\nflags:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\t%s\n", r[0], r[1])
		}
		_ = tw.Flush()
	}
	if len(c.example) > 0 {
		fmt.Fprintln(w, "\nexample:")
		for _, e := range c.example {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(rows) > 0 && !c.commandLine {
		fmt.Fprintln(w, "\nFlags may come before or after the other words; -name=value and -name value are the same.")
	}
}

// zeroDefault reports whether f's default is not worth printing.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return true
	}
	return false
}

// expectNoWords reports whether a command that takes only flags was given
// no other words; if it was, it says so.
func expectNoWords(fs *flag.FlagSet, words []string) bool {
	if len(words) == 0 {
		return true
	}
	fmt.Fprintf(fs.Output(), "%s: unexpected argument %q: it takes only flags\nRun '%s -h' to list them.\n", fs.Name(), words[0], fs.Name())
	return false
}

// badWords says that words do not fit the command, and what does
// (expected), and returns the exit code 2.
func badWords(fs *flag.FlagSet, words []string, expected string) int {
	got := "nothing"
	if len(words) > 0 {
		got = fmt.Sprintf("%q", strings.Join(words, " "))
	}
	fmt.Fprintf(fs.Output(), "%s: expected %s, got %s\nRun '%s -h' for its usage.\n", fs.Name(), expected, got, fs.Name())
	return 2
}
