package main

import (
	"fmt"
	"io"

	"github.com/conclave-agent/conclave/membership"
)

func runKeygen(args []string, stdout, stderr io.Writer) int {
	key, err := membership.GenerateKey()
	if err != nil {
		fmt.Fprintf(stderr, "agent keygen: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}
