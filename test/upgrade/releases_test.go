package upgrade

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// release is one tagged release of conclave: its tag and the commit the
// tag names. The commit is what the test builds when the tag is absent: CI
// may run on a clone of main that carries no tags.
type release struct {
	version string // vMAJOR.MINOR.PATCH, the tag's name
	commit  string // the full hash of the commit the tag names
}

// releases lists every release, oldest first. Add a row when you tag one
// (git tag -a vX.Y.Z COMMIT): TestReleaseTable fails while a local tag is
// missing here or names another commit, and TestRollingUpgrade upgrades
// from the newest row.
var releases = []release{
	{"v0.1.0", "2bf16e943ad491ea90064592ef0117c15af352ff"},
}

// previous returns the newest release, the one a cluster upgrades from.
func previous() release { return releases[len(releases)-1] }

var (
	versionRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// semver parses a vMAJOR.MINOR.PATCH tag; ok is false for any other name.
func semver(v string) (parts [3]int, ok bool) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return parts, false
	}
	for i := range parts {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return parts, false
		}
		parts[i] = n
	}
	return parts, true
}

// less orders two parsed versions.
func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// TestReleaseTable checks that releases is well formed (versions in
// order, full hashes) and, in a git checkout, that every local
// vMAJOR.MINOR.PATCH tag is listed with the commit it names: a release
// tagged without a row here would never be tested as the previous one.
func TestReleaseTable(t *testing.T) {
	var prev [3]int
	for i, r := range releases {
		v, ok := semver(r.version)
		if !ok {
			t.Errorf("release %q: not vMAJOR.MINOR.PATCH", r.version)
			continue
		}
		if !commitRE.MatchString(r.commit) {
			t.Errorf("release %s: commit %q is not a full 40-digit hash", r.version, r.commit)
		}
		if i > 0 && !less(prev, v) {
			t.Errorf("release %s is listed after %s: keep the table oldest first", r.version, releases[i-1].version)
		}
		prev = v
	}

	root, err := gitRoot()
	if err != nil {
		t.Skipf("tags not checked: %v", err)
	}
	out, err := git(root, "tag", "--list", "v*")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, r := range releases {
		listed[r.version] = r.commit
	}
	tags := 0
	for _, tag := range strings.Fields(out) {
		if _, ok := semver(tag); !ok {
			continue
		}
		tags++
		commit, err := git(root, "rev-parse", "--verify", tag+"^{commit}")
		if err != nil {
			t.Fatal(err)
		}
		commit = strings.TrimSpace(commit)
		switch want, ok := listed[tag]; {
		case !ok:
			t.Errorf("tag %s (commit %s) is not in the releases table of test/upgrade/releases_test.go: add {%q, %q}", tag, commit, tag, commit)
		case want != commit:
			t.Errorf("tag %s names commit %s, the releases table says %s: fix the table or the tag", tag, commit, want)
		}
	}
	t.Logf("%d releases listed, %d release tags in this clone", len(releases), tags)
}

// errNoRepo means the release cannot be built here because its source is
// not at hand: no git, no repository, or a clone without the commit.
var errNoRepo = errors.New("the release's source is not in this clone")

// git runs git with args in dir and returns its standard output; an error
// carries its standard error.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// gitRoot returns the top of the git work tree this package is in; the
// error wraps errNoRepo when there is none (or no git).
func gitRoot() (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", fmt.Errorf("%w: git is not installed", errNoRepo)
	}
	out, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%w: not a git checkout (%v)", errNoRepo, err)
	}
	return strings.TrimSpace(out), nil
}

// resolve returns the commit to build for r: the one its tag names when
// the tag is present (and then it must be the table's), else the table's
// commit when the clone has it. The error wraps errNoRepo when neither is
// here.
func resolve(root string, r release) (string, error) {
	if out, err := git(root, "rev-parse", "--verify", "--quiet", r.version+"^{commit}"); err == nil {
		if got := strings.TrimSpace(out); got != r.commit {
			return "", fmt.Errorf("tag %s names commit %s but the releases table says %s: fix the table or the tag", r.version, got, r.commit)
		}
		return r.commit, nil
	}
	if _, err := git(root, "cat-file", "-e", r.commit+"^{commit}"); err != nil {
		return "", fmt.Errorf("%w: neither tag %s nor commit %s is here (a shallow clone?); fetch them with git fetch --unshallow --tags", errNoRepo, r.version, r.commit)
	}
	return r.commit, nil
}

// buildRelease builds r's agent from the repository's history: git archive
// of its commit, extracted into a temporary folder, then go build
// ./cmd/agent there with the version stamped in. Its modules come from the
// module cache or the module proxy, like any build. It skips the test when
// the commit is not in this clone and fails it on any other error.
func buildRelease(t *testing.T, r release) string {
	t.Helper()
	root, err := gitRoot()
	if err == nil {
		_, err = resolve(root, r)
	}
	if errors.Is(err, errNoRepo) {
		t.Skipf("cannot build release %s (commit %s): %v", r.version, r.commit, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "src.tar")
	if _, err := git(root, "archive", "--format=tar", "--output="+tarball, r.commit); err != nil {
		t.Fatalf("extracting release %s: %v", r.version, err)
	}
	if out, err := exec.Command("tar", "-xf", tarball, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("extracting release %s: tar: %v: %s", r.version, err, out)
	}
	bin := filepath.Join(dir, "agent-"+r.version)
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version="+r.version, "./cmd/agent")
	build.Dir = src
	// The release is a module of its own here: a go.work around the
	// checkout must not pull the tree's packages into its build.
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building release %s (commit %s) in %s: %v\n%s", r.version, r.commit, src, err, out)
	}
	return bin
}
