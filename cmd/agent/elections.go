package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// runElections is `agent elections`: every election the agent runs, one
// line each, from GET /v1/elections (the default election alone from an
// agent before named elections).
func runElections(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("elections", stderr)
	cf := addClientFlags(fs)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	list, err := c.Elections(ctx)
	if err != nil {
		return fail(stderr, "elections", cf.socket, err)
	}
	if cf.json {
		if list == nil {
			list = []api.Election{}
		}
		printJSON(stdout, list)
		return 0
	}
	printElections(stdout, list)
	return 0
}

// printElections writes the table of agent elections.
func printElections(w io.Writer, list []api.Election) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROTOCOL\tROLE\tLEADER\tEPOCH\tLEASE\tHEALTH")
	for _, e := range list {
		leader := e.Leader
		if leader == "" {
			leader = "(none)"
		}
		lease := "-"
		if e.Role == api.RoleLeader && e.Lease() > 0 {
			lease = e.Lease().Round(time.Millisecond).String()
		}
		health := "-"
		if h := e.Health; h != nil {
			health = h.Status
			if h.Maintenance != nil && h.Maintenance.Reason != "" {
				health += " (" + h.Maintenance.Reason + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Election, e.Protocol, e.Role, leader, e.Epoch, lease, health)
	}
	_ = tw.Flush()
}
