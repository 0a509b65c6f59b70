package main

import (
	"regexp"
	"testing"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := cli(t, "version")
	if code != 0 || stderr != "" || !regexp.MustCompile(`^conclave agent \S+\n$`).MatchString(stdout) {
		t.Errorf("agent version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	if code, stdout, _ := cli(t, "version"); code != 0 || stdout != "conclave agent v1.2.3\n" {
		t.Errorf("agent version with -X main.version=v1.2.3: exit %d, %q", code, stdout)
	}
}
