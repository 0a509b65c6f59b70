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

// The ring algorithm names config accepts are the ring library's own.
func TestRingAlgorithmNamesMatchTheLibrary(t *testing.T) {
	for cfg, lib := range map[string]string{RingLCR: ring.AlgLCR, RingHS: ring.AlgHS, RingPeterson: ring.AlgPeterson} {
		if cfg != lib {
			t.Errorf("config accepts %q where the ring library names %q", cfg, lib)
		}
		c := Default()
		c.Node = Node{Name: "n1", ID: 1, DataDir: "d"}
		c.API.Socket = "d/agent.sock"
		c.Election.Protocol, c.Election.Voters, c.Election.RingAlgorithm = ProtocolRing, nil, cfg
		if err := c.Validate(); err != nil {
			t.Errorf("ring_algorithm %q: %v", cfg, err)
		}
	}
}
