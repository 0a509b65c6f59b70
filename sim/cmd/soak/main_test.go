package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSoakPrintsFigures(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-protocol", "majority", "-schedules", "20", "-seed", "3", "-workers", "2", "-faults", "split,crash,pause"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"schedules run:   20", "faults injected:", "split:", "elections:", "violations:      0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "resign:         1") || !strings.Contains(out.String(), "resign:         0") {
		t.Errorf("-faults did not restrict the schedule:\n%s", out.String())
	}
}

func TestSoakVoters(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-protocol", "majority", "-voters", "-schedules", "20", "-seed", "3", "-workers", "2"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "voter-change:") || strings.Contains(out.String(), "voter-change:   0\n") {
		t.Errorf("-voters made no voter change:\n%s", out.String())
	}
}

// TestSoakReplay replays one seed twice: the full trace must be identical,
// and a violation (this seed exposes the known majority transfer bug) must
// exit 1 with the seed and invariant in the report.
func TestSoakReplay(t *testing.T) {
	args := []string{"-protocol", "majority", "-faults", "resign,slow-network", "-replay", "5266705631892356520"}
	var out1, out2, errb bytes.Buffer
	code := run(args, &out1, &errb)
	run(args, &out2, &errb)
	if out1.String() != out2.String() {
		t.Fatal("two replays of the same seed printed different traces")
	}
	if !strings.Contains(out1.String(), "seed 5266705631892356520: 3 nodes") || strings.Count(out1.String(), "\n") < 100 {
		t.Fatalf("replay output lacks the trace or summary:\n%s", out1.String())
	}
	switch code {
	case 1:
		if !strings.Contains(out1.String(), "sim: seed 5266705631892356520: invariant lease violated") {
			t.Fatalf("exit 1 without the violation report:\n%s", out1.String())
		}
	case 0:
		t.Log("the known majority transfer bug no longer reproduces with this seed")
	default:
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestSoakRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-protocol", "nope"},
		{"-faults", "earthquake"},
		{"-bogus"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errb.String())
		}
	}
}
