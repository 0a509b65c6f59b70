package racetest

import "testing"

// SkipSampledSchedules skips a test that runs a random sample of the
// simulator's fault schedules when the race detector is on: the schedules
// matrix covers the same fault sets (a sample of every cell under -race,
// 20,000 fresh schedules per cell without it in scripts/test), and the
// detector makes each schedule some ten times slower. Tests of fixed,
// named seeds do not call it.
func SkipSampledSchedules(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("under the race detector the schedules matrix (sim TestMatrix) samples this fault set; scripts/test runs it in full without the detector")
	}
}
