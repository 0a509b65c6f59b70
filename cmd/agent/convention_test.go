package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// conventionCase is how the convention test exercises one command of the
// table: the words it takes (nil: none), and whether it is a client
// command, whose flags can be shown to work after its words by pointing
// -socket at nothing.
type conventionCase struct {
	words  []string
	client bool
}

var conventionCases = map[string]conventionCase{
	"run":        {},
	"dev":        {},
	"status":     {client: true},
	"elections":  {client: true},
	"members":    {client: true},
	"tune":       {client: true},
	"leader":     {client: true},
	"watch":      {client: true},
	"resign":     {client: true},
	"maint":      {words: []string{"on"}, client: true},
	"voters":     {words: []string{"add", "n4"}, client: true},
	"recover":    {},
	"exec":       {},
	"keys":       {client: true},
	"keygen":     {},
	"version":    {},
	"completion": {words: []string{"bash"}},
	"man":        {},
}

// TestEveryCommandFollowsTheConvention runs every command of the CLI's
// table through the one convention: help by -h, -help, --help and `agent
// help NAME`, identical, on stdout with exit 0, in the one layout; a
// runnable example; a stray word or an unknown flag refused with exit 2 on
// stderr, naming the command; flags accepted before and after the words.
func TestEveryCommandFollowsTheConvention(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "nobody.sock")
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			cc, ok := conventionCases[c.name]
			if !ok {
				t.Fatalf("command %s has no case in conventionCases: add one", c.name)
			}
			code, help, stderr := cli(t, "help", c.name)
			if code != 0 || stderr != "" {
				t.Fatalf("agent help %s: exit %d, stderr %q; want 0 and nothing on stderr", c.name, code, stderr)
			}
			for _, h := range []string{"-h", "-help", "--help"} {
				if code, stdout, stderr := cli(t, c.name, h); code != 0 || stdout != help || stderr != "" {
					t.Errorf("agent %s %s: exit %d, stderr %q, stdout differs from agent help %s: %q", c.name, h, code, stderr, c.name, stdout)
				}
			}
			if !strings.HasPrefix(help, "usage: agent "+c.name) || !strings.Contains(help, "\nexample:\n  agent "+c.name) {
				t.Errorf("agent help %s lacks the synopsis or the example:\n%s", c.name, help)
			}
			for line := range strings.SplitSeq(help, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("agent help %s prints a default twice: %q", c.name, line)
				}
			}
			// The example's flags exist and its words fit: run it with
			// -h added where the command still parses flags.
			for _, ex := range c.example {
				args := exampleArgs(ex)
				at := len(args)
				if c.commandLine {
					at = slices.Index(args, "--")
				}
				args = slices.Insert(args, at, "-h")
				if code, _, stderr := cli(t, args...); code != 0 {
					t.Errorf("example %q does not parse: exit %d, %s", ex, code, stderr)
				}
			}
			if code, stdout, stderr := cli(t, c.name, "-no-such-flag"); code != 2 || stdout != "" ||
				!strings.HasPrefix(stderr, "flag provided but not defined") || !strings.Contains(stderr, "agent "+c.name+" -h") {
				t.Errorf("agent %s -no-such-flag: exit %d, stdout %q, stderr %q; want 2 and a pointer to -h", c.name, code, stdout, stderr)
			}
			if !c.commandLine {
				args := append([]string{c.name}, cc.words...)
				args = append(args, "stray")
				if code, stdout, stderr := cli(t, args...); code != 2 || stdout != "" || !strings.HasPrefix(stderr, "agent "+c.name+": ") || !strings.Contains(stderr, "stray") {
					t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want 2 and the word named", args, code, stdout, stderr)
				}
			}
			if !cc.client {
				return
			}
			after := append(append([]string{c.name}, cc.words...), "-socket", nowhere, "-timeout", "2s")
			before := append([]string{c.name, "-socket", nowhere}, cc.words...)
			between := slices.Clone(before)
			if len(cc.words) > 1 {
				between = []string{c.name, cc.words[0], "-socket", nowhere, cc.words[1]}
			}
			for _, args := range [][]string{after, before, between} {
				code, stdout, stderr := cli(t, args...)
				if code != 1 || stdout != "" || !strings.Contains(stderr, "no agent socket at "+nowhere) {
					t.Errorf("agent %q: exit %d, stdout %q, stderr %q; want the flags taken wherever they are (exit 1, no agent at the socket)", args, code, stdout, stderr)
				}
			}
		})
	}
}

// exampleArgs splits an example command line after "agent" into words,
// with single quotes grouping.
func exampleArgs(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range strings.TrimPrefix(line, "agent ") {
		switch {
		case r == '\'':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// TestTopLevelHelp: the command list on stdout when asked for, on stderr
// with exit 2 when no command or a wrong one is given; an unknown name is
// named, with the valid ones.
func TestTopLevelHelp(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		code    int
		list    bool   // the command list is printed
		mention string // and stderr says this
	}{
		{nil, 2, true, ""},
		{[]string{"-h"}, 0, true, ""},
		{[]string{"-help"}, 0, true, ""},
		{[]string{"--help"}, 0, true, ""},
		{[]string{"help"}, 0, true, ""},
		{[]string{"frobnicate"}, 2, true, `unknown command "frobnicate"`},
		{[]string{"stauts"}, 2, true, `did you mean "status"?`},
		{[]string{"help", "frobnicate"}, 2, false, "the commands are run, dev, status"},
		{[]string{"-socket", "x", "status"}, 2, false, "flags go after the command's name, as in: agent status -socket x"},
	} {
		code, stdout, stderr := cli(t, tt.args...)
		if code != tt.code {
			t.Errorf("agent %q: exit %d, want %d", tt.args, code, tt.code)
		}
		out, other := stdout, stderr
		if tt.code != 0 {
			out, other = stderr, stdout
		}
		if other != "" && tt.code == 0 || tt.code != 0 && stdout != "" {
			t.Errorf("agent %q: stdout %q, stderr %q: help belongs on stdout, mistakes on stderr", tt.args, stdout, stderr)
		}
		if tt.list {
			for _, c := range commands() {
				if !strings.Contains(out, "\n  "+c.name+" ") {
					t.Errorf("agent %q: the list lacks %s:\n%s", tt.args, c.name, out)
				}
			}
		}
		if !strings.Contains(stderr, tt.mention) {
			t.Errorf("agent %q: stderr %q does not say %q", tt.args, stderr, tt.mention)
		}
	}
}
