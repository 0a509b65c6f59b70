package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/membership"
)

func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agent keygen")
		fmt.Fprintln(stderr, "Prints a fresh random cluster key (base64 of 32 bytes) for [gossip] key.")
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
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
