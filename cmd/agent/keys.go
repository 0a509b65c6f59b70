package main

import (
	"context"
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
)

// runKeys is `agent keys [list]`, `agent keys install|use|remove KEY`:
// one step of a key rotation on the agent behind the socket. Each step is
// idempotent, so a rotation cut short can be run again from the start.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keys", stderr)
	cf := addClientFlags(fs)
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
	// One agent answers: [1/1]. The count is of the agents that hold
	// each key, as Consul prints it.
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
