package main

import (
	"flag"
	"fmt"
)

// runBench parses the benchmark flags and runs the selected parts.
func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return fmt.Errorf("not implemented yet (internal subcommands: %v)", subcommandNames())
}
