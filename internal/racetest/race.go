//go:build !race

// Package racetest tells tests whether the race detector is on, so that
// CPU-heavy randomised tests (the simulator's thousands of schedules) can
// run a sample under -race and their full count in the suite's non-race
// pass (scripts/test runs both). It must never be imported by non-test code.
package racetest

// Enabled is true when the binary was built with -race.
const Enabled = false
