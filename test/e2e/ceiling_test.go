package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
)

// writeState gives a node's data directory a valid state record, as a buggy
// build, a restore from the wrong backup or a hostile member would.
func writeState(t *testing.T, dir string, hs protocols.HardState) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, store.FileName), store.Encode(hs), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAbsurdStateRecordRefusedAtStart: with term = epoch = 2^64−2 in its
// state record, an agent used to join, lead once at 2^64−1 and wedge the
// cluster for good (the next term wraps). It must refuse to start, naming
// the file and what to do, while the other two elect without it.
func TestAbsurdStateRecordRefusedAtStart(t *testing.T) {
	c := newCluster(t, 3, "majority")
	bad := c.nodes[2]
	writeState(t, bad.dataDir, protocols.HardState{Term: 1<<64 - 2, Vote: 3, Epoch: 1<<64 - 2})
	c.startAll()
	code := bad.p.wait(t, exitWait)
	out := bad.p.log()
	file := filepath.Join(bad.dataDir, store.FileName)
	if code == 0 || !strings.Contains(out, file) || !strings.Contains(out, "ceiling") || !strings.Contains(out, "deleting the file") {
		t.Fatalf("agent with an absurd state record exited %d; want an error naming %s, the ceiling and the fix:\n%s", code, file, out)
	}
	t.Logf("%s exited %d: %s", bad.name, code, lastLine(out))
	a := c.waitAgreement(0)
	if a.epoch > protocols.Ceiling {
		t.Fatalf("the others took epoch %d from the refused record", a.epoch)
	}
}

// TestLargestAcceptedTermKeepsElecting gives one member a state record at
// protocols.MaxAccepted, the largest term and epoch every node adopts from
// anyone: the cluster must take it and keep electing across repeated
// SIGKILLs of the leader, and no agent's epoch may ever go back.
func TestLargestAcceptedTermKeepsElecting(t *testing.T) {
	for _, protocol := range []string{"majority", "bully"} {
		t.Run(protocol, func(t *testing.T) {
			c := newCluster(t, 3, protocol)
			high := protocols.MaxAccepted
			writeState(t, c.nodes[0].dataDir, protocols.HardState{Term: high, Epoch: high})
			c.startAll()

			// Watch every agent's epoch all along: it must never go back.
			var (
				mu      sync.Mutex
				highest = map[string]uint64{}
				back    []string
			)
			stop := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					for _, nd := range c.nodes {
						st, err := nd.status()
						if err != nil {
							continue // killed or restarting
						}
						mu.Lock()
						if st.Epoch < highest[nd.name] {
							back = append(back, fmt.Sprintf("%s: %d after %d", nd.name, st.Epoch, highest[nd.name]))
						}
						highest[nd.name] = max(highest[nd.name], st.Epoch)
						mu.Unlock()
					}
				}
			}()
			defer func() { close(stop); <-watched }()

			a := c.waitAgreement(high - 1)
			t.Logf("%s leads in epoch %d", a.leader, a.epoch)
			for kill := range 3 {
				old := c.byName(a.leader)
				old.p.signal(t, syscall.SIGKILL)
				old.p.wait(t, exitWait)
				next := c.waitAgreement(a.epoch)
				t.Logf("kill %d: after SIGKILL of %s, %s leads in epoch %d", kill+1, a.leader, next.leader, next.epoch)
				c.start(slices.Index(c.nodes, old))
				a = c.waitAgreement(next.epoch - 1)
			}
			if a.epoch <= high || a.epoch > protocols.Ceiling {
				t.Fatalf("final epoch %d, want in (%d, %d]", a.epoch, high, protocols.Ceiling)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(back) > 0 {
				t.Fatalf("epochs went back: %v", back)
			}
		})
	}
}
