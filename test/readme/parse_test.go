package readme

import (
	"strings"
	"testing"
)

// TestParseRejects: the parser refuses what would let a README command go
// unchecked.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, md, want string }{
		{"unmarked block", "text\n\n    go build ./...\n", `README.md:3: code block "go build ./..." has no <!-- readme-test`},
		{"unmarked fence", "```\nmake\n```\n", `code block "make" has no`},
		{"marker without block", "<!-- readme-test: run -->\n\ntext\n", "has no code block after it"},
		{"unknown kind", "<!-- readme-test: maybe -->\n\n    ls\n", `unknown kind "maybe"`},
		{"skip without reason", "<!-- readme-test: skip -->\n\n    ls\n", "skip needs reason"},
		{"background without socket", "<!-- readme-test: background name=a -->\n\n    x\n", "needs name= and at least one socket="},
		{"bad expect", "<!-- readme-test: run expect=\"(\" -->\n\n    ls\n", "expect="},
	} {
		_, err := Parse(tc.md)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParseBlocks(t *testing.T) {
	md := "a\n\n<!-- readme-test: run expect=\"x \\\"y\\\"\" -->\n\n    one\n      two\n\n    three\n\ntext\n" +
		"  <!-- readme-test: stop a b -->\n"
	steps, err := Parse(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Text != "one\n  two\n\nthree" || steps[0].Line != 5 || steps[0].M.Expects[0] != `x "y"` {
		t.Fatalf("steps = %+v", steps)
	}
	if steps[1].M.Kind != "stop" || strings.Join(steps[1].M.Args, ",") != "a,b" {
		t.Errorf("stop step = %+v", steps[1].M)
	}
}

func TestSamplePattern(t *testing.T) {
	re := samplePattern(`22:41:30.248  failover: n3 leads epoch 2, 246.1ms after n2 was killed`)
	for _, s := range []string{
		"12:00:01.002  failover: n1 leads epoch 17, 1.2s after n3 was killed",
		"12:00:01.002  failover: n1 leads epoch 3, 912µs after n3 was killed",
	} {
		if !re.MatchString(s) {
			t.Errorf("%q does not match %s", s, re)
		}
	}
	if re.MatchString("12:00:01.002  handover: n1 leads epoch 3, 9ms after n3 was killed") {
		t.Errorf("a different line matches %s", re)
	}
}
