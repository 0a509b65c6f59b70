package main

import (
	"context"
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
)

// runKeys is `agent keys [list]`, `agent keys install|use|remove KEY`:
// one step of a key rotation, run by the agent behind the socket on every
// member through gossip, and the count of members that acknowledged it,
// as `consul keyring` prints it. Each step is idempotent, so a rotation
// cut short can be run again from the start. -local acts on this agent
// alone: the way to mend a member that missed a step and can no longer
// gossip with the others.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keys", stderr)
	cf := addClientFlags(fs)
	local := fs.Bool("local", false, "act on this agent only, not on every member")
	force := fs.Bool("force", false, "use or remove although some member is down or silent (or, for use, lacks the key); a remove of a key some member uses is refused even so")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	op := ""
	switch {
	case len(words) == 0 || (len(words) == 1 && words[0] == "list"):
	case len(words) == 2 && (words[0] == api.KeyInstall || words[0] == api.KeyUse || words[0] == api.KeyRemove):
		op = words[0]
		if _, err := keyring.ParseKey(words[1]); err != nil {
			fmt.Fprintf(stderr, "agent keys %s: %v\n", op, err)
			return 2
		}
	default:
		return badWords(fs, words, "list, 'install KEY', 'use KEY' or 'remove KEY'")
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	if *local {
		var (
			k   api.Keys
			err error
		)
		if op == "" {
			k, err = c.Keys(ctx)
		} else {
			k, err = c.ChangeKeys(ctx, op, words[1])
		}
		if err != nil {
			return fail(stderr, "keys", cf.socket, err)
		}
		if cf.json {
			printJSON(stdout, k)
			return 0
		}
		for _, key := range k.Installed {
			b, _ := keyring.ParseKey(key)
			role := ""
			if key == k.Primary {
				role = "  primary"
			}
			fmt.Fprintf(stdout, "%s  %s  [1/1]%s\n", key, keyring.Fingerprint(b), role)
		}
		return 0
	}
	var (
		r   api.KeyReport
		err error
	)
	if op == "" {
		r, err = c.ClusterKeys(ctx)
	} else {
		r, err = c.ChangeClusterKeys(ctx, op, words[1], *force)
	}
	if err != nil {
		return fail(stderr, "keys", cf.socket, err)
	}
	// A member that did not acknowledge fails the command: a script
	// rotating keys must not go on to the next step.
	code = 0
	if r.Acked < r.Members {
		code = 1
	}
	if cf.json {
		printJSON(stdout, r)
		return code
	}
	printKeyReport(stdout, r)
	return code
}

// printKeyReport prints a KeyReport: for a list, each key with the members
// that hold it and use it as their primary; for a step, how many members
// acknowledged; then each member that did not, and why.
func printKeyReport(w io.Writer, r api.KeyReport) {
	if r.Op == "list" {
		for _, k := range r.Keys {
			role := ""
			switch {
			case k.Primary == r.Members:
				role = "  primary"
			case k.Primary > 0:
				role = fmt.Sprintf("  primary on [%d/%d]", k.Primary, r.Members)
			}
			fmt.Fprintf(w, "%s  %s  [%d/%d]%s\n", k.Key, k.Fingerprint, k.Installed, r.Members, role)
		}
	} else {
		fmt.Fprintf(w, "%s %s: [%d/%d] members acknowledged\n", r.Op, r.Fingerprint, r.Acked, r.Members)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  %s: %s\n", f.Member, f.Error)
	}
}
