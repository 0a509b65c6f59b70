//go:build conclave_unsafe

package core

import "github.com/conclave-agent/conclave/protocols/majority"

// plantedMajority turns on majority's LeaseTooLong in this build: the
// leader counts its lease for three election timeouts instead of
// ET·(1−ρ)/(1+ρ), so it reports a lease that outlives the voters' promise.
// Only the chaos harness builds it (go run ./chaos -planted), to show that
// its lease check catches the bug; never ship such a binary.
func plantedMajority() majority.Unsafe { return majority.Unsafe{LeaseTooLong: true} }
