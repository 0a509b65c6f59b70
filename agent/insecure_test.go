package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// An agent allowed to listen on every address without a key
// (gossip.insecure) runs, and repeats its warning while it does: one line
// at start would scroll away.
func TestInsecureAgentWarnsWhileRunning(t *testing.T) {
	old := insecureWarnEvery
	insecureWarnEvery = 20 * time.Millisecond
	t.Cleanup(func() { insecureWarnEvery = old })

	tc := newTestCluster(t, 1, "majority", "")
	c := &tc.cfgs[0]
	c.Gossip.Bind = fmt.Sprintf("0.0.0.0:%d", freePort(t))
	c.Transport.Listen = fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", freePort(t))
	if err := c.Validate(); err == nil {
		t.Fatal("Validate accepted a wildcard bind without a key or gossip.insecure")
	}
	c.Gossip.Insecure = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitAgreed(0, 30*time.Second)
	warnings := func() int {
		n := 0
		for _, e := range tc.logs[0].All() {
			if strings.Contains(e.Message, "no cluster key while gossip.bind=0.0.0.0:") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for warnings() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d insecure warnings logged, want one at start and more while running", warnings())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
