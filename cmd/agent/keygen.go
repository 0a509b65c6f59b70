package main

import (
	"context"
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/membership"
)

func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keygen", stderr)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	key, err := membership.GenerateKey()
	if err != nil {
		fmt.Fprintf(stderr, "agent keygen: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}
