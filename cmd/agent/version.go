package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version, commit and modified are set by the package build
// (scripts/package) with -ldflags "-X main.version=v0.2.0 -X main.commit=…
// -X main.modified=false", which win over what the Go toolchain recorded:
// the toolchain records nothing from a source archive, from a git worktree
// (it looks for a .git directory) or under -buildvcs=false.
var (
	version  = ""
	commit   = ""
	modified = "" // "true" or "false"
)

// buildVersion is what `agent version` reports.
type buildVersion struct {
	// Version is the release tag (v0.2.0), or the module's pseudo-version
	// the toolchain derived from the nearest tag, or "(devel)".
	Version string `json:"version"`
	// Commit is the full VCS revision, "" when unknown.
	Commit string `json:"commit"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the toolchain that built the binary (go1.26.0).
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// readVersion gathers the version from the ldflags variables, else from the
// build information Go records (vcs.revision, vcs.modified, the main
// module's version).
func readVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if commit != "" {
		v.Commit = commit
	}
	if modified != "" {
		v.Modified = modified == "true"
	}
	return v
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	v := readVersion()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "agent version: %v\n", err)
			return 1
		}
		return 0
	}
	commit := v.Commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS information)"
	case v.Modified:
		commit += " (modified)"
	}
	fmt.Fprintf(stdout, "conclave agent %s\ncommit:   %s\ngo:       %s %s\n", v.Version, commit, v.Go, v.Platform)
	return 0
}
