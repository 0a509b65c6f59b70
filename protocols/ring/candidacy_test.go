package ring

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols/internal/testnet"
)

func TestIneligibleNodeNeverLeads(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { testnet.CheckIneligibleNeverLeads(t, builder(t, withAlg(alg))) })
	}
}

func TestIneligibleAloneKeepsLeading(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) { testnet.CheckIneligibleAloneKeepsLeading(t, builder(t, withAlg(alg))) })
	}
}
