package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDesignDecisionPlacesExist reads docs/design.md's table of where each
// decision is made (§3) and checks that every file it names exists and
// declares every function named after it: a refactoring that moves a
// decision must move the sentence too.
func TestDesignDecisionPlacesExist(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "**Where each decision is made.**")
	if i < 0 {
		t.Fatal("docs/design.md has no 'Where each decision is made' table")
	}
	tick := regexp.MustCompile("`([^`]+)`")
	places := 0
	for _, line := range strings.Split(doc[i:], "\n")[1:] {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		file, src := "", ""
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			tok := m[1]
			switch {
			case strings.HasSuffix(tok, ".go"):
				file = tok
				b, err := os.ReadFile(filepath.Join(root, tok))
				if err != nil {
					t.Errorf("design.md names %s, which does not exist: %v", tok, err)
					file = ""
				}
				src = string(b)
			case strings.Contains(tok, "/"):
				if _, err := os.Stat(filepath.Join(root, tok)); err != nil {
					t.Errorf("design.md names %s, which does not exist", tok)
				}
			case file != "":
				name := strings.TrimPrefix(tok, "type ")
				re := regexp.MustCompile(`(?m)^(func (\([^)]*\) )?` + regexp.QuoteMeta(name) + `[(\[]|type ` + regexp.QuoteMeta(name) + ` )`)
				if !re.MatchString(src) {
					t.Errorf("design.md says %s is in %s, which declares no such function or type", name, file)
				}
				places++
			}
		}
	}
	if places < 10 {
		t.Errorf("found only %d named places in design.md's decision table", places)
	}
}
