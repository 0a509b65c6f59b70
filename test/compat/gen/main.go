// Command gen writes the golden copies of test/compat for the build it is
// compiled in. scripts/compat-golden runs it inside a release's source, so
// the copies are the release's bytes, not the tree's.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conclave-agent/conclave/test/compat"
)

func main() {
	out := flag.String("out", "", "directory to write golden.json and socket/*.json into")
	release := flag.String("release", "", "the release's tag, vMAJOR.MINOR.PATCH")
	commit := flag.String("commit", "", "the release's commit")
	flag.Parse()
	if err := write(*out, *release, *commit); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}

func write(out, release, commit string) error {
	if out == "" || release == "" || commit == "" {
		return fmt.Errorf("-out, -release and -commit are required")
	}
	g, err := compat.Build()
	if err != nil {
		return err
	}
	g.Release, g.Commit = release, commit
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "socket"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "golden.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	bodies, err := compat.SocketJSON()
	if err != nil {
		return err
	}
	for name, body := range bodies {
		if err := os.WriteFile(filepath.Join(out, "socket", name+".json"), append(body, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
