//go:build !conclave_unsafe

package core

import "github.com/conclave-agent/conclave/protocols/majority"

// plantedMajority is majority's planted bugs in this build: none. The
// conclave_unsafe build tag (planted_on.go) turns one on for the chaos
// harness's own test.
func plantedMajority() majority.Unsafe { return majority.Unsafe{} }
