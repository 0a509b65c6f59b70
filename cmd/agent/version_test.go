package main

import (
	"encoding/json"
	"regexp"
	"runtime"
	"testing"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := cli(t, "version")
	if code != 0 || stderr != "" || !regexp.MustCompile(`^conclave agent \S+\ncommit: +\S.*\ngo: +go\S+ \S+/\S+\n$`).MatchString(stdout) {
		t.Errorf("agent version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	oldV, oldC, oldM := version, commit, modified
	t.Cleanup(func() { version, commit, modified = oldV, oldC, oldM })
	version, commit, modified = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "false"
	want := "conclave agent v1.2.3\ncommit:   0123456789abcdef0123456789abcdef01234567\ngo:       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if code, stdout, _ := cli(t, "version"); code != 0 || stdout != want {
		t.Errorf("agent version with -X main.version=v1.2.3: exit %d, %q, want %q", code, stdout, want)
	}

	code, stdout, stderr = cli(t, "version", "-json")
	var got buildVersion
	if code != 0 || stderr != "" {
		t.Fatalf("agent version -json: exit %d, stderr %q", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("agent version -json: %v: %q", err, stdout)
	}
	if got.Version != "v1.2.3" || got.Commit != commit || got.Modified || got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("agent version -json = %+v", got)
	}
}

func TestVersionModified(t *testing.T) {
	oldV, oldC, oldM := version, commit, modified
	t.Cleanup(func() { version, commit, modified = oldV, oldC, oldM })
	version, commit, modified = "v1.2.3", "abc", "true"
	if code, stdout, _ := cli(t, "version"); code != 0 || !regexp.MustCompile(`\ncommit: +abc \(modified\)\n`).MatchString(stdout) {
		t.Errorf("agent version of a modified tree: exit %d, %q", code, stdout)
	}
}
