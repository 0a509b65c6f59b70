package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/config"
)

// TestDesignContract holds docs/design.md §6, the names users depend on,
// to the code both ways: every configuration key (read off config.Config's
// toml tags), every socket path and query parameter (the api package's
// Path* and Param* constants) and every command of the CLI's table
// (cmd/agent's commands()) is named there, and everything named there
// exists. A name added to the code and not to the contract fails here,
// naming what §6 lacks.
func TestDesignContract(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	spans := contractSpans(t, string(b))

	// Config keys: spans such as `[node] name, id` and `[[check]] name`.
	keyed := regexp.MustCompile(`^(\[\[?)([a-zA-Z_.]+)\]\]? ([a-z_, ]+)$`)
	documented := map[string]bool{}
	for _, s := range spans {
		m := keyed.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		for k := range strings.SplitSeq(m[3], ",") {
			documented[configKey(m[1] == "[[", m[2], strings.TrimSpace(k))] = true
		}
	}
	keys := configKeys(reflect.TypeOf(config.Default()))
	if len(keys) < 40 {
		t.Fatalf("found only %d configuration keys in config.Config: the reflection walk is broken", len(keys))
	}
	compare(t, "configuration key", keys, documented, "config.Config")

	// Socket paths and query parameters: spans such as `GET /v1/leader?index=E&wait=D`.
	consts := apiConstants(t, filepath.Join(root, "api"))
	request := regexp.MustCompile(`^(GET|POST) (/[a-z0-9/_]*)(\?(.*))?$`)
	paths, params := map[string]bool{}, map[string]bool{}
	for _, s := range spans {
		m := request.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		paths[m[2]] = true
		if m[4] != "" {
			for p := range strings.SplitSeq(m[4], "&") {
				name, _, _ := strings.Cut(p, "=")
				params[name] = true
			}
		}
	}
	var codePaths, codeParams []string
	for name, v := range consts {
		switch {
		case strings.HasPrefix(name, "Path"):
			codePaths = append(codePaths, v)
		case strings.HasPrefix(name, "Param"):
			codeParams = append(codeParams, v)
		}
	}
	slices.Sort(codePaths)
	slices.Sort(codeParams)
	if len(codePaths) < 9 || len(codeParams) < 5 {
		t.Fatalf("found only %d Path and %d Param constants in api/: the parse is broken", len(codePaths), len(codeParams))
	}
	compare(t, "socket path", codePaths, paths, "the api package's Path constants")
	compare(t, "query parameter", codeParams, params, "the api package's Param constants")

	// The CLI: the span `agent run | dev | …`.
	cli := map[string]bool{}
	for _, s := range spans {
		if rest, ok := strings.CutPrefix(s, "agent "); ok && strings.Contains(rest, " | ") {
			for c := range strings.SplitSeq(rest, "|") {
				cli[strings.TrimSpace(c)] = true
			}
		}
	}
	cmds := cliCommands(t, filepath.Join(root, "cmd", "agent", "main.go"))
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in cmd/agent's commands(): the parse is broken", len(cmds))
	}
	compare(t, "CLI command", cmds, cli, "cmd/agent's commands()")
}

// contractSpans returns the code spans of design.md's §6, their white space
// (line breaks included: a span may wrap) folded to one space.
func contractSpans(t *testing.T, doc string) []string {
	t.Helper()
	i := strings.Index(doc, "## §6 ")
	if i < 0 {
		t.Fatal("docs/design.md has no §6")
	}
	sec := doc[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	var spans []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(sec, -1) {
		spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return spans
}

// configKey names a key as a reader finds it: node.priority, or
// [[check]].name for a key of an array of tables.
func configKey(array bool, section, key string) string {
	if array {
		return "[[" + section + "]]." + key
	}
	return section + "." + key
}

// configKeys lists the keys of a config.Config: its fields are the tables
// ([node]), arrays of tables ([[check]]) and maps of tables
// ([elections.NAME]), whose fields are the keys.
func configKeys(cfg reflect.Type) []string {
	var keys []string
	for tf := range cfg.Fields() {
		section := tf.Tag.Get("toml")
		if section == "" || section == "-" {
			continue
		}
		table, array := tf.Type, false
		if table.Kind() == reflect.Slice {
			table, array = table.Elem(), true
		}
		if table.Kind() == reflect.Map { // [elections.NAME]
			table, section = table.Elem(), section+".NAME"
		}
		for kf := range table.Fields() {
			if k := strings.Split(kf.Tag.Get("toml"), ",")[0]; k != "" && k != "-" {
				keys = append(keys, configKey(array, section, k))
			}
		}
	}
	return keys
}

// apiConstants returns the string constants declared in the non-test
// files of package dir, by name.
func apiConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							consts[name.Name] = v
						}
					}
				}
			}
		}
	}
	return consts
}

// cliCommands returns the name of every entry of the command table, the
// function commands() in cmd/agent's main.go (a package main, so read
// rather than imported).
func cliCommands(t *testing.T, path string) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "commands" || fd.Recv != nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "name" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						names = append(names, v)
					}
				}
			}
			return true
		})
	}
	return names
}

// compare fails t for every name of code that §6 leaves out and for every
// name §6 gives that code lacks.
func compare(t *testing.T, what string, code []string, doc map[string]bool, source string) {
	t.Helper()
	inCode := map[string]bool{}
	for _, c := range code {
		inCode[c] = true
		if !doc[c] {
			t.Errorf("docs/design.md §6 does not name the %s %q (from %s): add it", what, c, source)
		}
	}
	var stale []string
	for d := range doc {
		if !inCode[d] {
			stale = append(stale, d)
		}
	}
	slices.Sort(stale)
	for _, d := range stale {
		t.Errorf("docs/design.md §6 names the %s %q, which %s does not have: remove or correct it", what, d, source)
	}
}
