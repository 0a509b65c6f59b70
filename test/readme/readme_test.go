package readme

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/internal/leakcheck"
	"github.com/conclave-agent/conclave/internal/loopback"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// Bounds. The first commands compile the agent (go run, go build), which
// takes minutes on a cold cache and 2 cores; the rest take seconds.
const (
	defaultTimeout = 10 * time.Minute // a run block; a background's sockets
	answerWait     = time.Minute      // a stdin line's answer, a stream, sample output
	stopWait       = 30 * time.Second // a background or stream after Ctrl-C
)

const repoRoot = "../.."

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeMarkers checks, without running anything, that every code
// block of the README says how it runs and that the markers fit together.
func TestReadmeMarkers(t *testing.T) {
	steps, err := Parse(readREADME(t))
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]*Marker{}
	for _, s := range steps {
		m := s.M
		switch m.Kind {
		case "background":
			if started[m.Name] != nil {
				t.Errorf("README.md:%d: background %s is still running (started at line %d)", m.Line, m.Name, started[m.Name].Line)
			}
			started[m.Name] = m
		case "stdin":
			bg := started[m.Args[0]]
			if bg == nil || !bg.Stdin {
				t.Errorf("README.md:%d: stdin %s: no background %s with stdin before it", m.Line, m.Args[0], m.Args[0])
			}
			if n := len(s.Lines()); n != len(m.Expects) {
				t.Errorf("README.md:%d: stdin %s types %d lines but has %d expect=; give one per line", m.Line, m.Args[0], n, len(m.Expects))
			}
		case "output":
			if _, ok := started[m.Args[0]]; !ok {
				t.Errorf("README.md:%d: output %s: no background %s before it", m.Line, m.Args[0], m.Args[0])
			}
		case "stop":
			for _, name := range m.Args {
				if started[name] == nil {
					t.Errorf("README.md:%d: stop %s: not running", m.Line, name)
				}
				delete(started, name)
			}
		}
	}
	for name, m := range started {
		t.Errorf("README.md:%d: background %s is never stopped: add <!-- readme-test: stop %s --> where a reader would end it", m.Line, name, name)
	}
}

// TestReadme runs the README's commands as written, in order.
func TestReadme(t *testing.T) {
	readme := readREADME(t)
	steps, err := Parse(readme)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := copyRepo(repoRoot, work); err != nil {
		t.Fatalf("copying the repository: %v", err)
	}
	ports := portMap(t, readme)
	cfg := filepath.Join(work, "config.example.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(ports.Replace(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner{t: t, work: work, ports: ports, procs: map[string]*proc{}}
	t.Cleanup(r.killAll)
	for _, s := range steps {
		r.step(s)
		if t.Failed() {
			return // later commands depend on this one
		}
	}
	for name := range r.procs {
		r.stop(name, 0)
	}
	t.Logf("not run: %s", strings.Join(r.skipped, "; "))
}

// portMap maps every fixed loopback port of the README's commands to a
// free one (see the package comment).
func portMap(t *testing.T, readme string) *strings.Replacer {
	re := regexp.MustCompile(`127\.0\.0\.1:(\d{4,5})\b|/tcp/(\d{4,5})\b`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(readme, -1) {
		seen[m[1]+m[2]] = true
	}
	old := make([]string, 0, len(seen))
	for p := range seen {
		old = append(old, p)
	}
	sort.Strings(old)
	var pairs []string
	used := map[int]bool{}
	for _, p := range old {
		var free int
		for free == 0 || used[free] {
			var err error
			if free, err = loopback.FreePort(); err != nil {
				t.Fatal(err)
			}
		}
		used[free] = true
		n := strconv.Itoa(free)
		pairs = append(pairs, "127.0.0.1:"+p, "127.0.0.1:"+n, "/tcp/"+p, "/tcp/"+n)
		t.Logf("port %s → %s", p, n)
	}
	return strings.NewReplacer(pairs...)
}

// copyRepo copies the files of the checkout at src (git's tracked and
// untracked files, or all files without git) to dst.
func copyRepo(src, dst string) error {
	var files []string
	out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if d.IsDir() && (rel == ".git" || rel == "bin" || rel == "data") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		from := filepath.Join(src, f)
		fi, err := os.Lstat(from)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted in the work tree
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

type runner struct {
	t       *testing.T
	work    string
	ports   *strings.Replacer
	prelude []string // shell assignments of earlier blocks (S=…)
	procs   map[string]*proc
	skipped []string
}

// proc is a background or streaming command in its own process group, so
// that Ctrl-C (SIGINT to the group) reaches what `go run` started too.
type proc struct {
	name   string
	line   int
	script string // the block, as in the README
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *syncBuffer
	done   chan struct{}
	err    error
	cursor int            // output up to here is matched by earlier sample output
	allow  *regexp.Regexp // lines exempt from the clean-shutdown check
}

func (r *runner) script(s Step) string {
	return "set -euo pipefail\n" + strings.Join(r.prelude, "\n") + "\n" + r.ports.Replace(s.Text) + "\n"
}

var assignRE = regexp.MustCompile(`^(export )?[A-Za-z_][A-Za-z0-9_]*=\S*$`)

func (r *runner) step(s Step) {
	t := r.t
	switch s.M.Kind {
	case "skip":
		first, _, _ := strings.Cut(s.Text, "\n")
		r.skipped = append(r.skipped, fmt.Sprintf("README.md:%d %q (%s)", s.Line, first, s.M.Reason))
	case "run":
		r.run(s)
		for _, l := range s.Lines() {
			if assignRE.MatchString(strings.TrimSpace(l)) {
				r.prelude = append(r.prelude, strings.TrimSpace(l))
			}
		}
	case "background":
		p := r.start(s.M.Name, s, s.M.Stdin)
		if s.M.Allow != "" {
			p.allow = regexp.MustCompile(s.M.Allow)
		}
		r.procs[s.M.Name] = p
		for _, sock := range s.M.Sockets {
			r.waitSocket(p, filepath.Join(r.work, sock))
		}
	case "stdin":
		r.typeInto(s)
	case "output":
		r.sample(s)
	case "stream":
		r.stream(s)
	case "stop":
		for _, name := range s.M.Args {
			r.stop(name, s.M.Line)
		}
	default:
		t.Fatalf("README.md:%d: kind %q", s.M.Line, s.M.Kind)
	}
}

// run runs a block as a bash script: exit 0 and every expect, or, with
// retry, again until then.
func (r *runner) run(s Step) {
	t := r.t
	timeout := s.M.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	deadline := time.Now().Add(s.M.Retry)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		cmd := exec.CommandContext(ctx, "bash", "-c", r.script(s))
		cmd.Dir, cmd.Env = r.work, env()
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		problem := ""
		if err != nil {
			problem = fmt.Sprintf("exit: %v", err)
		} else if re := missing(string(out), s.M.Expects); re != "" {
			problem = fmt.Sprintf("output does not match %q", re)
		}
		if problem == "" {
			t.Logf("README.md:%d ran:\n%s", s.Line, indentText(s.Text))
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("README.md:%d: %s\ncommands:\n%s\noutput:\n%s", s.Line, problem, indentText(s.Text), indentText(string(out)))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// missing returns the first pattern that out does not match, or "".
func missing(out string, expects []string) string {
	for _, e := range expects {
		if !regexp.MustCompile(`(?m)` + e).MatchString(out) {
			return e
		}
	}
	return ""
}

func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCLAVE_SOCKET=") {
			out = append(out, kv)
		}
	}
	return out
}

func (r *runner) start(name string, s Step, withStdin bool) *proc {
	t := r.t
	cmd := exec.Command("bash", "-c", r.script(s))
	cmd.Dir, cmd.Env = r.work, env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{name: name, line: s.Line, script: s.Text, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if withStdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.stdin = w
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("README.md:%d: %v", s.Line, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Logf("README.md:%d started %s:\n%s", s.Line, name, indentText(s.Text))
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) interrupt() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT) }

func (r *runner) waitSocket(p *proc, sock string) {
	t := r.t
	deadline := time.Now().Add(defaultTimeout)
	for {
		if p.exited() {
			t.Fatalf("README.md:%d: %s exited (%v) before its socket %s answered; output:\n%s", p.line, p.name, p.err, sock, indentText(p.out.String()))
		}
		c := client.New(sock)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Health(ctx)
		cancel()
		c.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("README.md:%d: %s: socket %s did not answer within %v: %v; output:\n%s", p.line, p.name, sock, defaultTimeout, err, indentText(p.out.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitOutput waits until out (from offset from) matches re and returns the
// end of the match.
func (r *runner) waitOutput(p *proc, from int, re *regexp.Regexp, what string) int {
	t := r.t
	deadline := time.Now().Add(answerWait)
	for {
		out := p.out.String()
		if loc := re.FindStringIndex(out[from:]); loc != nil {
			return from + loc[1]
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s: no output matching %q (exited: %v, %v); output:\n%s", what, re, p.exited(), p.err, indentText(out))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typeInto types a stdin block into its background command, line by line,
// waiting after each for the answer its expect describes.
func (r *runner) typeInto(s Step) {
	t := r.t
	p := r.procs[s.M.Args[0]]
	if p == nil || p.stdin == nil {
		t.Fatalf("README.md:%d: no background %s reading stdin", s.Line, s.M.Args[0])
	}
	for i, line := range s.Lines() {
		from := len(p.out.String())
		if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
			t.Fatalf("README.md:%d: typing %q into %s: %v", s.Line+i, line, p.name, err)
		}
		r.waitOutput(p, from, regexp.MustCompile(`(?m)`+s.M.Expects[i]), fmt.Sprintf("README.md:%d: after typing %q into %s", s.Line+i, line, p.name))
		t.Logf("README.md:%d typed into %s: %s", s.Line+i, p.name, line)
	}
}

// sample checks sample output against what the background printed since
// the last sample.
func (r *runner) sample(s Step) {
	p := r.procs[s.M.Args[0]]
	if p == nil {
		r.t.Fatalf("README.md:%d: no background %s", s.Line, s.M.Args[0])
	}
	for i, line := range s.Lines() {
		if strings.TrimSpace(line) == "..." {
			continue
		}
		p.cursor = r.waitOutput(p, p.cursor, samplePattern(line), fmt.Sprintf("README.md:%d: sample output %q of %s", s.Line+i, strings.TrimSpace(line), p.name))
	}
	r.t.Logf("README.md:%d: %s printed output like the sample", s.Line, p.name)
}

// stream runs a command that streams until interrupted.
func (r *runner) stream(s Step) {
	p := r.start("stream", s, false)
	expects := s.M.Expects
	if len(expects) == 0 {
		expects = []string{`\S`}
	}
	for _, e := range expects {
		r.waitOutput(p, 0, regexp.MustCompile(`(?m)`+e), fmt.Sprintf("README.md:%d: streaming", s.Line))
	}
	p.interrupt()
	select {
	case <-p.done:
	case <-time.After(stopWait):
		r.t.Fatalf("README.md:%d: still streaming %v after Ctrl-C", s.Line, stopWait)
	}
}

// cleanShutdownRE matches what a clean shutdown must not log.
var cleanShutdownRE = regexp.MustCompile(`(?m)\tERROR\t|"error"|panic:`)

// stop sends Ctrl-C to a background command (unless it has ended, as
// agent dev does on quit) and checks that it stopped cleanly.
func (r *runner) stop(name string, markerLine int) {
	t := r.t
	p := r.procs[name]
	if p == nil {
		t.Fatalf("README.md:%d: stop %s: not running", markerLine, name)
	}
	delete(r.procs, name)
	from := len(p.out.String())
	if !p.exited() {
		p.interrupt()
		select {
		case <-p.done:
		case <-time.After(stopWait):
			t.Fatalf("README.md:%d: %s still running %v after Ctrl-C", p.line, name, stopWait)
		}
	}
	out := p.out.String()
	if p.err != nil && !goRunInterrupted(p, out[from:]) {
		t.Errorf("README.md:%d: %s exited with %v; output:\n%s", p.line, name, p.err, indentText(out))
	}
	var bad, allowed []string
	for _, l := range strings.Split(out[from:], "\n") {
		switch {
		case !cleanShutdownRE.MatchString(l):
		case p.allow != nil && p.allow.MatchString(l):
			allowed = append(allowed, l)
		default:
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 {
		t.Errorf("README.md:%d: %s logged an error while stopping:\n%s\nall it printed since Ctrl-C:\n%s", p.line, name, indentText(strings.Join(bad, "\n")), indentText(out[from:]))
		return
	}
	if len(allowed) > 0 {
		t.Logf("README.md:%d: %s stopped, logging (allowed by the marker):\n%s", p.line, name, indentText(strings.Join(allowed, "\n")))
		return
	}
	t.Logf("README.md:%d: %s stopped cleanly", p.line, name)
}

// goRunInterrupted reports whether p is `go run` that exited 1 only
// because it saw Ctrl-C too: go run then exits 1 even when the program it
// ran exited 0, and it prints "exit status N" only when the program
// failed.
func goRunInterrupted(p *proc, outAfterStop string) bool {
	var ee *exec.ExitError
	return strings.Contains(p.script, "go run ") && errors.As(p.err, &ee) && ee.ExitCode() == 1 &&
		!strings.Contains(outAfterStop, "exit status")
}

func (r *runner) killAll() {
	for _, p := range r.procs {
		if !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if r.t.Failed() {
			r.t.Logf("output of %s (README.md:%d):\n%s", p.name, p.line, indentText(p.out.String()))
		}
	}
}

func indentText(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// syncBuffer is a bytes.Buffer written by a command while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
