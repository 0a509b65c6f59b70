package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// runMaint is agent maint on [-reason TEXT] | off: maintenance mode, the
// same as a failing check (docs/health.md), kept across restarts.
func runMaint(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("maint", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	reason := fs.String("reason", "", "why, shown in agent status (with on)")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if len(words) != 1 || (words[0] != "on" && words[0] != "off") {
		return badWords(fs, words, "on or off")
	}
	on := words[0] == "on"
	if !on && *reason != "" {
		fmt.Fprintln(stderr, "agent maint: -reason goes with on")
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	res, err := c.Maint(ctx, on, *reason)
	if err != nil {
		return fail(stderr, "maint", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, res)
		return 0
	}
	of := ofElection(c.ElectionName())
	if res.Maintenance {
		fmt.Fprintf(stdout, "maintenance on%s: this agent no longer puts itself forward and hands leadership over if it leads\n", of)
	} else {
		fmt.Fprintf(stdout, "maintenance off%s: this agent may lead again once its checks pass\n", of)
	}
	return 0
}

// printHealth adds the leader's meta and this agent's health to agent
// status (nothing for agents without them).
func printHealth(w io.Writer, st api.Status) {
	if m := st.LeaderMeta.Map(); len(m) > 0 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + m[k]
		}
		fmt.Fprintf(w, "leader meta\t%s\n", strings.Join(parts, " "))
	}
	h := st.Health
	if h == nil {
		return
	}
	line := h.Status
	if h.Maintenance != nil {
		line += fmt.Sprintf(" (since %s", h.Maintenance.Since.Format(time.RFC3339))
		if h.Maintenance.Reason != "" {
			line += ": " + h.Maintenance.Reason
		}
		line += ")"
	}
	if h.NoHealthyCandidate {
		line += "; still leading: no healthy voter can take over"
	}
	fmt.Fprintf(w, "health\t%s\n", line)
	if h.Priority != 0 {
		fmt.Fprintf(w, "priority\t%d\n", h.Priority)
	}
	for _, c := range h.Checks {
		out := strings.TrimSpace(c.Output)
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			out = out[i+1:] // the last line says most
		}
		if len(out) > 80 {
			out = out[len(out)-80:]
		}
		fmt.Fprintf(w, "  check %s\t%s  %s\n", c.Name, c.Status, out)
	}
}
