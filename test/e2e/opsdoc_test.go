package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// opsDoc is the operations page whose blocks TestOperationsVotersDoc runs.
const opsDoc = "../../docs/operations-voters.md"

// opsDataDir is the data directory the page's commands name; the test
// puts the host's own in its place.
const opsDataDir = "/var/lib/conclave"

// opsStep is one marker of the page with the code block after it (none
// for kill): <!-- ops-test: KIND [NAMES…] [on=NAME] [expect="RE"]…
// [retry=D] -->. Kinds: run (the default when on= is given: the block
// runs in bash against NAME's socket), kill (SIGKILL, the host died),
// stop (SIGTERM and wait: the block shows the reader's command), start
// (the agents start again with their command lines: the block shows the
// reader's).
type opsStep struct {
	line    int
	kind    string
	names   []string
	on      string
	expects []*regexp.Regexp
	retry   time.Duration
	block   string
}

var (
	opsMarker = regexp.MustCompile(`^<!-- ops-test: (.*) -->$`)
	opsArg    = regexp.MustCompile(`(\w+)="([^"]*)"|(\w+)=(\S+)|(\S+)`)
)

// parseOpsDoc returns the page's steps. Every fenced block must follow a
// marker, so that nothing on the page goes untested.
func parseOpsDoc(t *testing.T, text string) []opsStep {
	t.Helper()
	var (
		steps []opsStep
		cur   *opsStep // marker waiting for its block
		in    bool
		block []string
	)
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case in && strings.HasPrefix(line, "```"):
			in = false
			cur.block = strings.Join(block, "\n")
			steps = append(steps, *cur)
			cur = nil
		case in:
			block = append(block, line)
		case strings.HasPrefix(line, "```"):
			if cur == nil {
				t.Fatalf("%s:%d: a code block without an ops-test marker before it", opsDoc, n)
			}
			in, block = true, nil
		case opsMarker.MatchString(line):
			if cur != nil {
				t.Fatalf("%s:%d: marker at line %d has no block", opsDoc, n, cur.line)
			}
			s := opsStep{line: n, kind: "run"}
			for _, m := range opsArg.FindAllStringSubmatch(opsMarker.FindStringSubmatch(line)[1], -1) {
				key, val := m[1]+m[3], m[2]+m[4]
				switch {
				case key == "on":
					s.on = val
				case key == "expect":
					s.expects = append(s.expects, regexp.MustCompile("(?m)"+val))
				case key == "retry":
					d, err := time.ParseDuration(val)
					if err != nil {
						t.Fatalf("%s:%d: retry: %v", opsDoc, n, err)
					}
					s.retry = d
				case key != "":
					t.Fatalf("%s:%d: unknown key %q", opsDoc, n, key)
				case slices.Contains([]string{"kill", "stop", "start"}, m[5]) && len(s.names) == 0 && s.kind == "run":
					s.kind = m[5]
				default:
					s.names = append(s.names, m[5])
				}
			}
			if s.kind == "kill" {
				steps = append(steps, s)
				continue
			}
			cur = &s
		}
	}
	if cur != nil || in {
		t.Fatalf("%s: the last marker has no (closed) block", opsDoc)
	}
	return steps
}

// TestOperationsVotersDoc runs every procedure of
// docs/operations-voters.md, as written, against six real agents: the
// page's commands are the test.
func TestOperationsVotersDoc(t *testing.T) {
	b, err := os.ReadFile(opsDoc)
	if err != nil {
		t.Fatal(err)
	}
	steps := parseOpsDoc(t, string(b))
	c := newCluster(t, 6, "majority", "-election.voters=n1,n2,n3")
	for i := range 5 {
		c.start(i)
	}
	c.waitAgreement(0)
	path := filepath.Dir(agentBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, s := range steps {
		switch s.kind {
		case "kill":
			for _, name := range s.names {
				nd := c.byName(name)
				nd.p.signal(t, syscall.SIGKILL)
				nd.p.wait(t, exitWait)
			}
		case "stop":
			for _, name := range s.names {
				nd := c.byName(name)
				nd.p.signal(t, syscall.SIGTERM)
				if code := nd.p.wait(t, exitWait); code != 0 {
					t.Fatalf("%s:%d: %s exited %d on SIGTERM", opsDoc, s.line, name, code)
				}
			}
		case "start":
			for _, name := range s.names {
				c.start(slices.Index(c.nodes, c.byName(name)))
			}
		case "run":
			nd := c.byName(s.on)
			if nd == nil {
				t.Fatalf("%s:%d: no host %q", opsDoc, s.line, s.on)
			}
			out := runOpsBlock(t, s, nd, path)
			t.Logf("%s:%d on %s:\n%s", opsDoc, s.line, s.on, out)
		}
	}
}

// runOpsBlock runs each line of s's block in bash with nd's socket, a line
// that fails again until s.retry has passed (a cluster settling after a
// failure answers "no leader" or "in flight" for a moment), and checks
// the block's output against s's expects, the whole block again until
// s.retry has passed.
func runOpsBlock(t *testing.T, s opsStep, nd *node, path string) string {
	t.Helper()
	deadline := time.Now().Add(s.retry)
	for {
		var all strings.Builder
		for _, line := range strings.Split(s.block, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			line = strings.ReplaceAll(line, opsDataDir, nd.dataDir)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
				cmd.Env = append(os.Environ(), "PATH="+path, "CONCLAVE_SOCKET="+nd.socket)
				out, err := cmd.CombinedOutput()
				cancel()
				if err == nil {
					all.Write(out)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s:%d on %s: %q: %v\n%s", opsDoc, s.line, nd.name, line, err, out)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		out := all.String()
		var missing []string
		for _, re := range s.expects {
			if !re.MatchString(out) {
				missing = append(missing, re.String())
			}
		}
		if len(missing) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d on %s: output does not match %s:\n%s", opsDoc, s.line, nd.name, strings.Join(missing, ", "), out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
