package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// complete runs bash's completion for line (the cursor at its end) with
// the script `agent completion bash` prints, the way bash does on TAB: it
// looks up the function `complete -p agent` registered and calls it with
// COMP_WORDS, COMP_CWORD, COMP_LINE and COMP_POINT set, then prints
// COMPREPLY.
func complete(t *testing.T, script, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, shellQuote(w))
	}
	prog := `set -e
source "$1"
spec=$(complete -p agent)
fn=${spec#*-F }; fn=${fn%% *}
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE=` + shellQuote(line) + `
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$fn" agent "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog, "bash", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash completion of %q: %v: %s", line, err, stderr.String())
	}
	var got []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	return got
}

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	code, script, stderr := cli(t, "completion", "bash")
	if code != 0 || stderr != "" {
		t.Fatalf("agent completion bash: exit %d, %s", code, stderr)
	}
	path := filepath.Join(t.TempDir(), "agent.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "n1.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"agent st", []string{"status"}},
		{"agent status -", []string{"-consistent", "-election", "-json", "-socket", "-timeout"}},
		{"agent el", []string{"elections"}},
		{"agent exec -el", []string{"-election"}},
		{"agent watch -election ", nil}, // a name, not a file
		{"agent ", append(commandNames(), "help")},
		{"agent maint o", []string{"off", "on"}},
		{"agent voters ", []string{"add", "remove"}},
		{"agent completion ", []string{"bash", "fish", "zsh"}},
		{"agent help vo", []string{"voters"}},
		{"agent run -metrics.l", []string{"-metrics.listen"}},
		{"agent run -config " + dir + "/n", []string{dir + "/n1.toml"}},
		{"agent run -node.name ", nil}, // a value: no flags, no files
		{"agent frobnicate -", nil},
	} {
		got := complete(t, path, tt.line)
		t.Logf("%s<TAB> → %s", tt.line, strings.Join(got, " "))
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("bash completion of %q = %q, want %q", tt.line, got, want)
		}
	}
}

// Every command's every flag is in each shell's script: they are read from
// the flag sets the commands build.
func TestCompletionCoversEveryFlag(t *testing.T) {
	scripts := map[string]string{}
	for _, sh := range completionShells {
		code, out, stderr := cli(t, "completion", sh)
		if code != 0 || stderr != "" {
			t.Fatalf("agent completion %s: exit %d, %s", sh, code, stderr)
		}
		scripts[sh] = out
	}
	for _, c := range commands() {
		flags := commandFlags(c)
		if c.name == "status" && len(flags) < 3 || c.name == "run" && len(flags) < 30 {
			t.Fatalf("%s: only %d flags read from its flag set", c.name, len(flags))
		}
		for _, f := range flags {
			for sh, s := range scripts {
				want := map[string]string{"bash": `[' ]-` + f.name + `[' ]`, "zsh": `'-` + f.name + `[=\[]`, "fish": `-o '` + f.name + `'`}[sh]
				if !regexp.MustCompile(want).MatchString(s) {
					t.Errorf("agent completion %s lacks %s's flag -%s", sh, c.name, f.name)
				}
			}
		}
	}
	if code, _, stderr := cli(t, "completion", "tcsh"); code != 2 || !strings.Contains(stderr, "bash, zsh, fish") {
		t.Errorf("agent completion tcsh: exit %d, %q; want 2 naming the shells", code, stderr)
	}
	// zsh and fish check their scripts' syntax where they are installed.
	for sh, args := range map[string][]string{"zsh": {"-n"}, "fish": {"--no-execute"}} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Logf("%s not installed: its script's syntax not checked", sh)
			continue
		}
		cmd := exec.Command(sh, args...)
		cmd.Stdin = strings.NewReader(scripts[sh])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s %v on agent completion %s: %v: %s", sh, args, sh, err, out)
		}
	}
}

// The man pages: one per command plus agent.1, each flag in its page, and
// groff reads them without a warning where it is installed.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "man", "-dir", dir); code != 0 {
		t.Fatalf("agent man: exit %d, %s", code, stderr)
	}
	if code, _, stderr := cli(t, "man"); code != 2 || !strings.Contains(stderr, "-dir is required") {
		t.Errorf("agent man without -dir: exit %d, %q", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(files) != len(commands())+1 {
		t.Errorf("%d pages, want %d (agent.1 and one per command)", len(files), len(commands())+1)
	}
	for _, c := range commands() {
		page, err := os.ReadFile(filepath.Join(dir, "agent-"+c.name+".1"))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, f := range commandFlags(c) {
			if !bytes.Contains(page, []byte(".B \\-"+roff(f.name))) {
				t.Errorf("agent-%s.1 lacks -%s", c.name, f.name)
			}
		}
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Log("groff not installed: the pages' syntax not checked")
		return
	}
	for _, f := range files {
		out, err := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", f).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww on %s: %v: %s", filepath.Base(f), err, out)
		}
	}
}
