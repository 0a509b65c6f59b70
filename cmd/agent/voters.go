package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/conclave-agent/conclave/api"
)

// runVoters is `agent voters [-json]`, `agent voters add NAME` and
// `agent voters remove NAME` (majority). A change waits until it is
// committed or refused; any agent takes it and forwards it to the leader.
func runVoters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("voters", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	var change api.VoterChange
	switch {
	case len(words) == 0:
	case len(words) == 2 && words[0] == "add":
		change.Add = words[1]
	case len(words) == 2 && words[0] == "remove":
		change.Remove = words[1]
	default:
		return badWords(fs, words, "nothing (to list the voters), 'add NAME' or 'remove NAME'")
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
