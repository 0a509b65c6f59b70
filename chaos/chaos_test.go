package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The CI schedule: a key rotation, every process fault kind once, the
// freeze of the leader's scheduler, every network fault kind when this
// runs as root with ip and iptables, and a key rotation again. About two to three minutes; skipped with -short.
// CONCLAVE_CHAOS_BIN names a folder of prebuilt agent and scheduler
// binaries (default: build them from this tree).

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func ciOptions(t *testing.T) Options {
	return Options{
		Seed:   1,
		Nodes:  3,
		Netns:  "auto",
		Bound:  20 * time.Second,
		Dir:    t.TempDir(),
		BinDir: os.Getenv("CONCLAVE_CHAOS_BIN"),
		Out:    logWriter{t},
	}
}

func TestChaosCI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real agents for a few minutes; skipped with -short")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opt := ciOptions(t)
	opt.Freeze = 30 * time.Second
	// A key rotation first, and again after every fault, with agents
	// restarted from their data directories: leadership must not move
	// during either (Check, invariant 7).
	opt.Schedule = append(append([]string{rotateKey}, processFaults...), freezeFault)
	withNet, why := netnsAvailable(os.Geteuid())
	if withNet {
		opt.Schedule = append(opt.Schedule, networkFaults...)
	} else {
		t.Logf("network faults not run: %s", why)
	}
	opt.Schedule = append(opt.Schedule, rotateKey)
	res, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Report.Print(&sb)
	t.Logf("run took %s\n%s", res.Duration.Round(time.Second), sb.String())
	for _, v := range res.Report.Violations {
		t.Errorf("violation: %s", v)
	}
	for _, kind := range opt.Schedule {
		if isNetworkFault(kind) && !res.Netns {
			continue
		}
		if res.Report.Faults[kind] == 0 {
			t.Errorf("fault %s never ran", kind)
		}
	}
	if got := res.Report.FreezeFirstWrite; len(got) != 1 || got[0] != "stale" {
		t.Errorf("frozen scheduler's first write on waking: %q, want [stale]", got)
	}
	if res.Report.WritesAccepted == 0 {
		t.Error("no job was ever written: the run shows nothing")
	}
	if o := res.Report.Ops; o.Consistent == 0 || o.LeaseClaims == 0 || o.Linearizable != "Ok" {
		t.Errorf("client operations: %d consistent leader reads, %d lease claims, linearizable %q; want some, some, Ok", o.Consistent, o.LeaseClaims, o.Linearizable)
	}
}

// TestChaosPlanted runs agents built with the conclave_unsafe tag, whose
// leader counts its lease for three election timeouts: when it is killed
// or paused, a new leader is elected while the lease it last reported
// still runs, and the lease check must say so — or the clean runs' zero
// overlaps prove nothing. About 30 s, the agent's build included.
func TestChaosPlanted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real agents; skipped with -short")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opt := ciOptions(t)
	opt.Planted = true
	opt.Netns = "off"
	opt.Freeze = 0
	// Each round alone overlaps by about 200–350 ms (a new leader after
	// about 1.5 election timeouts, the old lease for 3); four of them
	// leave room for a loaded CI machine that slows an election down.
	opt.Schedule = []string{"kill-leader", "pause-leader", "kill-leader", "pause-leader"}
	res, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Report.Print(&sb)
	t.Logf("planted run took %s\n%s", res.Duration.Round(time.Second), sb.String())
	if res.Report.Ops.LeaseOverlaps == 0 {
		t.Fatal("the agents' leases were too long, yet no two leases overlapped: the lease check cannot see the bug")
	}
	if _, err := os.Stat(res.Report.Ops.Visual); err != nil {
		t.Fatalf("no visualisation of the violation: %v", err)
	}
}

// TestChaosControl turns fencing off: the checker must then see the stale
// leader's writes, or the CI run above proves nothing.
func TestChaosControl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real agents; skipped with -short")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opt := ciOptions(t)
	opt.Control = true
	opt.Netns = "off"
	opt.Freeze = 5 * time.Second
	opt.Schedule = []string{"pause-leader", freezeFault}
	res, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Report.Print(&sb)
	t.Logf("control run took %s\n%s", res.Duration.Round(time.Second), sb.String())
	if res.Report.StaleAccepted == 0 && res.Report.Duplicates == 0 {
		t.Fatal("fencing off, yet no stale or duplicate job: the checker cannot see the bug")
	}
}
