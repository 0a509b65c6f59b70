package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version recorded by the Go toolchain is shown.
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	fmt.Fprintf(stdout, "conclave agent %s\n", versionString())
	return 0
}
