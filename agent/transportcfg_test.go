package agent

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/config"
)

// TestIdleProbeIntervalReachesTheTransport: transport.idle_probe_interval
// sets the transport's slow probe speed, and its spacing at a fifth of it.
func TestIdleProbeIntervalReachesTheTransport(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 30 * time.Second} {
		cfg := config.Default()
		cfg.Transport.IdleProbeInterval = config.Duration(d)
		tc := transportConfig(cfg)
		if tc.IdleProbeAfter != d || tc.IdleProbeSpacing != d/5 {
			t.Errorf("idle_probe_interval %v: transport probes idle members after %v, %v apart; want %v, %v apart", d, tc.IdleProbeAfter, tc.IdleProbeSpacing, d, d/5)
		}
	}
}
