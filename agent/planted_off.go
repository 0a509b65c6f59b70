//go:build !conclave_unsafe

package agent

import "github.com/conclave-agent/conclave/protocols/majority"

// plantedMajorityUnsafe is majority's planted bugs in this build: none.
// Only a binary built with the conclave_unsafe tag (planted_on.go), which
// the chaos harness builds to show that its checker catches a lease bug,
// carries one.
var plantedMajorityUnsafe = majority.Unsafe{}
