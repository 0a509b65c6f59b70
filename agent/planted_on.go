//go:build conclave_unsafe

package agent

import "github.com/conclave-agent/conclave/protocols/majority"

// plantedMajorityUnsafe turns on majority's LeaseTooLong: the leader
// counts its lease for three election timeouts instead of
// ET·(1−ρ)/(1+ρ), so it reports a lease that outlives the voters' promise.
// Only the chaos harness builds this (go run ./chaos -planted), to show
// that its lease check catches the bug; never ship such a binary.
var plantedMajorityUnsafe = majority.Unsafe{LeaseTooLong: true}
