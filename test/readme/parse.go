package readme

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Marker is one "<!-- readme-test: … -->" comment.
type Marker struct {
	Line    int           // README line of the comment
	Kind    string        // run, background, stdin, output, stream, skip, stop
	Args    []string      // bare words after the kind: a name, or stop's names
	Name    string        // background: name=
	Sockets []string      // background: socket=, in order
	Stdin   bool          // background: the bare word stdin
	Expects []string      // expect=, in order
	Retry   time.Duration // run: retry=
	Timeout time.Duration // run: timeout=
	Reason  string        // skip: reason=
	Allow   string        // background: allow=, log lines exempt from the clean-shutdown check
}

// Block is one code block of the README.
type Block struct {
	Line int    // README line of the block's first line
	Text string // dedented, without trailing blank lines
}

// Step is what the test does at one point of the README: what the marker M
// says with its block (none for stop).
type Step struct {
	Block
	M *Marker
}

var (
	markerRE = regexp.MustCompile(`^\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*$`)
	tokenRE  = regexp.MustCompile(`(\w+)(?:=("(?:[^"\\]|\\.)*"|\S+))?`)
)

// Kinds of marker that need a block after them.
var blockKinds = map[string]bool{"run": true, "background": true, "stdin": true, "output": true, "stream": true, "skip": true}

// Parse reads the README's markers and code blocks and returns the steps in
// order. It fails on a block without a marker, a marker without a block,
// and a marker it does not understand.
func Parse(readme string) ([]Step, error) {
	lines := strings.Split(readme, "\n")
	var steps []Step
	var pending *Marker
	inFence := false
	var fence []string
	fenceLine := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if !inFence {
				inFence, fence, fenceLine = true, nil, i+2
				continue
			}
			inFence = false
			st, err := attach(&pending, fenceLine, strings.Join(fence, "\n"))
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
			continue
		}
		if inFence {
			fence = append(fence, l)
			continue
		}
		if m := markerRE.FindStringSubmatch(l); m != nil {
			mk, err := parseMarker(i+1, m[1])
			if err != nil {
				return nil, err
			}
			if pending != nil {
				return nil, fmt.Errorf("README.md:%d: marker %q has no code block after it", pending.Line, pending.Kind)
			}
			if mk.Kind == "stop" {
				steps = append(steps, Step{M: mk})
				continue
			}
			pending = mk
			continue
		}
		if indent(l) >= 4 && strings.TrimSpace(l) != "" && (i == 0 || strings.TrimSpace(lines[i-1]) == "") {
			start := i
			var body []string
			for ; i < len(lines) && (strings.TrimSpace(lines[i]) == "" || indent(lines[i]) >= 4); i++ {
				body = append(body, lines[i])
			}
			i--
			st, err := attach(&pending, start+1, dedent(body))
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("README.md:%d: marker %q has no code block after it", pending.Line, pending.Kind)
	}
	return steps, nil
}

// attach gives the block at line the pending marker.
func attach(pending **Marker, line int, text string) (Step, error) {
	m := *pending
	if m == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		return Step{}, fmt.Errorf("README.md:%d: code block %q has no <!-- readme-test: … --> marker before it: "+
			"say how it runs (run, background, stdin, output, stream) or why it is not run (skip reason=\"…\"); see test/readme/doc.go", line, first)
	}
	*pending = nil
	return Step{Block: Block{Line: line, Text: text}, M: m}, nil
}

func parseMarker(line int, s string) (*Marker, error) {
	m := &Marker{Line: line}
	for i, tok := range tokenRE.FindAllStringSubmatch(s, -1) {
		key, val := tok[1], tok[2]
		if strings.HasPrefix(val, `"`) {
			val = strings.ReplaceAll(val[1:len(val)-1], `\"`, `"`)
		}
		bad := func(err error) error {
			return fmt.Errorf("README.md:%d: readme-test marker: %s=%s: %v", line, key, tok[2], err)
		}
		switch {
		case i == 0:
			m.Kind = key
		case !strings.Contains(tok[0], "="):
			if key == "stdin" && m.Kind == "background" {
				m.Stdin = true
			} else {
				m.Args = append(m.Args, key)
			}
		case key == "name":
			m.Name = val
		case key == "socket":
			m.Sockets = append(m.Sockets, val)
		case key == "expect":
			if _, err := regexp.Compile(val); err != nil {
				return nil, bad(err)
			}
			m.Expects = append(m.Expects, val)
		case key == "retry" || key == "timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				return nil, bad(err)
			}
			if key == "retry" {
				m.Retry = d
			} else {
				m.Timeout = d
			}
		case key == "reason":
			m.Reason = val
		case key == "allow":
			if _, err := regexp.Compile(val); err != nil {
				return nil, bad(err)
			}
			m.Allow = val
		default:
			return nil, fmt.Errorf("README.md:%d: readme-test marker: unknown key %q", line, key)
		}
	}
	switch {
	case !blockKinds[m.Kind] && m.Kind != "stop":
		return nil, fmt.Errorf("README.md:%d: readme-test marker: unknown kind %q", line, m.Kind)
	case m.Kind == "background" && (m.Name == "" || len(m.Sockets) == 0):
		return nil, fmt.Errorf("README.md:%d: readme-test background needs name= and at least one socket=", line)
	case (m.Kind == "stdin" || m.Kind == "output") && len(m.Args) != 1:
		return nil, fmt.Errorf("README.md:%d: readme-test %s needs the background command's name", line, m.Kind)
	case m.Kind == "stop" && len(m.Args) == 0:
		return nil, fmt.Errorf("README.md:%d: readme-test stop needs the names to stop", line)
	case m.Kind == "skip" && m.Reason == "":
		return nil, fmt.Errorf("README.md:%d: readme-test skip needs reason=\"…\"", line)
	}
	return m, nil
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// dedent removes the common indentation and trailing blank lines.
func dedent(body []string) string {
	for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
		body = body[:len(body)-1]
	}
	n := -1
	for _, l := range body {
		if strings.TrimSpace(l) != "" && (n < 0 || indent(l) < n) {
			n = indent(l)
		}
	}
	out := make([]string, len(body))
	for i, l := range body {
		if len(l) >= n {
			out[i] = l[n:]
		}
	}
	return strings.Join(out, "\n")
}

// Lines returns the block's non-empty lines.
func (b Block) Lines() []string {
	var out []string
	for _, l := range strings.Split(b.Text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// samplePattern turns a line of sample output into a pattern: times, node
// names, durations and numbers become wildcards, runs of spaces flexible.
func samplePattern(line string) *regexp.Regexp {
	tokens := regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3}|\bn\d+\b|\d+(?:\.\d+)?(?:µs|ms|s)\b|\d+|\s+`)
	var b strings.Builder
	b.WriteString(`(?m)^\s*`)
	last := 0
	trimmed := strings.TrimSpace(line)
	for _, loc := range tokens.FindAllStringIndex(trimmed, -1) {
		b.WriteString(regexp.QuoteMeta(trimmed[last:loc[0]]))
		tok := trimmed[loc[0]:loc[1]]
		switch {
		case strings.TrimSpace(tok) == "":
			b.WriteString(`\s+`)
		case strings.Contains(tok, ":"):
			b.WriteString(`\d\d:\d\d:\d\d\.\d{3}`)
		case tok[0] == 'n':
			b.WriteString(`n\d+`)
		case strings.HasSuffix(tok, "s"):
			b.WriteString(`[0-9.]+(?:µs|ms|s)`)
		default:
			b.WriteString(`\d+`)
		}
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(trimmed[last:]))
	b.WriteString(`\s*$`)
	return regexp.MustCompile(b.String())
}
