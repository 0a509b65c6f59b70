package protocols

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointDown enforces docs/design.md §2's one-way imports for
// the protocols and their tests: nothing under protocols/ imports the
// simulator, the core or the agent, which all sit above it. The
// simulator's own tests run the protocols' schedules instead.
func TestImportsPointDown(t *testing.T) {
	const mod = "github.com/conclave-agent/conclave/"
	above := []string{"sim", "core", "agent"}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			for _, a := range above {
				if p == mod+a || strings.HasPrefix(p, mod+a+"/") {
					t.Errorf("protocols/%s imports %s, which sits above the protocols (docs/design.md §2): move the test to that package", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d Go files under protocols/", checked)
	}
}
