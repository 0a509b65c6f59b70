package ring

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

// A node whose next epoch would pass protocols.Ceiling does not take the
// lead (it would wrap), and an absurd epoch is refused without a trace.
func TestNoEpochBeyondTheCeiling(t *testing.T) {
	testnet.CheckCeiling(t, func(hs protocols.HardState, log protocols.Logger) (*Node, error) {
		return New(Config{ID: 1, Members: testnet.Members(seq(2)), HardState: hs, Logger: log})
	}, protocols.Message{Kind: protocols.MsgRingLeader, From: 2, To: 1, Leader: 2})
}
