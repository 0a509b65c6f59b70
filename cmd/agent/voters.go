package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/conclave-agent/conclave/api"
)

// runVoters is `agent voters [-json]`, `agent voters add NAME` and
// `agent voters remove NAME` (majority). A change waits until it is
// committed or refused; any agent takes it and forwards it to the leader.
func runVoters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent voters", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agent voters [flags]             list the committed voters (and a pending change)")
		fmt.Fprintln(stderr, "       agent voters [flags] add NAME    make member NAME a voter")
		fmt.Fprintln(stderr, "       agent voters [flags] remove NAME make voter NAME an observer")
		fmt.Fprintln(stderr, "A change waits until a majority of the new voter set has it; run it on any agent.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var change api.VoterChange
	switch {
	case fs.NArg() == 0:
	case fs.NArg() == 2 && fs.Arg(0) == "add":
		change.Add = fs.Arg(1)
	case fs.NArg() == 2 && fs.Arg(0) == "remove":
		change.Remove = fs.Arg(1)
	default:
		fmt.Fprintf(stderr, "agent voters: expected no argument, 'add NAME' or 'remove NAME', got %q (flags go first)\nRun 'agent voters -h' for usage.\n", strings.Join(fs.Args(), " "))
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	var (
		v   api.Voters
		err error
	)
	switch {
	case change.Add != "":
		v, err = c.AddVoter(ctx, change.Add)
	case change.Remove != "":
		v, err = c.RemoveVoter(ctx, change.Remove)
	default:
		v, err = c.Voters(ctx)
	}
	if err != nil {
		return fail(stderr, "voters", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, v)
		return 0
	}
	switch {
	case change.Add != "":
		fmt.Fprintf(stdout, "added %s: ", change.Add)
	case change.Remove != "":
		fmt.Fprintf(stdout, "removed %s: ", change.Remove)
	}
	printVoters(stdout, v)
	return 0
}

// printVoters writes the human form of a voter configuration.
func printVoters(w io.Writer, v api.Voters) {
	fmt.Fprintf(w, "voters %s (index %d, term %d)\n", strings.Join(v.Voters, " "), v.Index, v.Term)
	if p := v.Pending; p != nil {
		fmt.Fprintf(w, "pending %s (index %d, term %d, not committed yet)\n", strings.Join(p.Voters, " "), p.Index, p.Term)
	}
}
