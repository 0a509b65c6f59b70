package ring

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

func TestIneligibleNodeNeverLeads(t *testing.T) {
	testnet.CheckIneligibleNeverLeads(t, builder(t, nil))
}

func TestIneligibleAloneKeepsLeading(t *testing.T) {
	testnet.CheckIneligibleAloneKeepsLeading(t, builder(t, nil))
}
