package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartTraceWritesATrace: CONCLAVE_TRACE makes the daemon write a Go
// execution trace, and without it nothing is written.
func TestStartTraceWritesATrace(t *testing.T) {
	t.Setenv(traceEnv, "")
	stop, err := startTrace()
	if err != nil {
		t.Fatalf("without %s: %v", traceEnv, err)
	}
	stop()

	path := filepath.Join(t.TempDir(), "agent.trace")
	t.Setenv(traceEnv, path)
	if stop, err = startTrace(); err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("%s does not hold a Go execution trace: %q…", path, b[:min(len(b), 16)])
	}
}

// TestStartTraceNamesTheVariable: a path that cannot be created is an
// error that says which variable asked for it.
func TestStartTraceNamesTheVariable(t *testing.T) {
	t.Setenv(traceEnv, filepath.Join(t.TempDir(), "missing", "agent.trace"))
	if _, err := startTrace(); err == nil || !strings.Contains(err.Error(), traceEnv) {
		t.Fatalf("error %v, want one naming %s", err, traceEnv)
	}
}
