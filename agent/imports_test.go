package agent

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAgentDecidesNothing enforces the rule of docs/design.md §2 that the
// agent does I/O around core.Node and decides nothing about elections or
// liveness: its non-test code may import protocols (the shared types) but
// no protocol package (majority, bully, ring, observe, internal/…) and not
// phi, so every decision is made where the simulator runs it.
func TestAgentDecidesNothing(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/conclave-agent/conclave/"
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range ast.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path, mod+"protocols/") || path == mod+"phi" {
				t.Errorf("%s imports %s: election and liveness decisions belong in core/ (docs/design.md §2), where the simulator runs them", f, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no agent source files found")
	}
}
