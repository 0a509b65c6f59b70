package membership

import (
	"fmt"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// TestLocalProfileConverges starts a cluster with the local profile's own
// timings (not shrunk) and waits until every node sees every other alive.
// Memberlist's unmodified local preset lost join gossip at this size; the
// raised RetransmitMult is what this guards. The time is logged, not
// asserted.
func TestLocalProfileConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts many nodes")
	}
	const n = 20
	began := time.Now()
	seed := start(t, Config{Name: "s", ID: 1000, Bind: "127.0.0.1:0", Profile: ProfileLocal})
	nodes := []*node{seed}
	for i := 1; i < n; i++ {
		cfg := Config{
			Name: fmt.Sprintf("n%02d", i), ID: protocols.ID(i), Bind: "127.0.0.1:0",
			Profile: ProfileLocal, Join: []string{seed.LocalAddr()},
		}
		nodes = append(nodes, start(t, cfg))
	}
	for _, nd := range nodes {
		nd.w.until(t, "everyone alive", func(view map[string]Member) bool {
			alive := 0
			for _, mb := range view {
				if mb.State == StateAlive {
					alive++
				}
			}
			return alive == n
		})
	}
	t.Logf("%d nodes (local profile) converged in %v", n, time.Since(began))
}
