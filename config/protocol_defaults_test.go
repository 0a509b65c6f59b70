package config

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols/bully"
	"github.com/conclave-agent/conclave/protocols/ring"
)

// The bully and ring libraries, left unconfigured, must time like the
// agent: their zero-duration defaults are the agent's configured defaults.
func TestProtocolLibraryDefaultsMatchTheAgent(t *testing.T) {
	d := Default()
	hb, et := d.Detector.HeartbeatInterval.Std(), d.Election.ElectionTimeout.Std()
	for _, c := range []struct {
		name   string
		hb, et any
	}{
		{"bully", bully.DefaultHeartbeatInterval, bully.DefaultElectionTimeout},
		{"ring", ring.DefaultHeartbeatInterval, ring.DefaultElectionTimeout},
	} {
		if c.hb != hb || c.et != et {
			t.Errorf("%s defaults: heartbeat %v, election timeout %v; the agent's: %v, %v", c.name, c.hb, c.et, hb, et)
		}
	}
}
