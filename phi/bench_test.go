package phi

import (
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

func BenchmarkHeartbeat(b *testing.B) {
	d := mustNew(b, DefaultConfig())
	now := protocols.Time(0)
	b.ReportAllocs()
	for b.Loop() {
		// Alternate gaps so the window really changes on every call.
		now += 90*ms + (now/ms)%20*ms
		d.Heartbeat(now)
	}
}

func BenchmarkPhi(b *testing.B) {
	d := mustNew(b, DefaultConfig())
	last := feed(d, 0, 90*ms, 110*ms, 95*ms, 105*ms)
	// Three regimes: before the mean (log1p), near the threshold (erfc)
	// and far past it (asymptotic series).
	for _, bc := range []struct {
		name    string
		elapsed protocols.Time
	}{{"early", 50 * ms}, {"threshold", 400 * ms}, {"far", 10_000 * ms}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink float64
			for b.Loop() {
				sink += d.Phi(last + bc.elapsed)
			}
			_ = sink
		})
	}
}

func BenchmarkSuspectAt(b *testing.B) {
	d := mustNew(b, DefaultConfig())
	feed(d, 0, 90*ms, 110*ms, 95*ms, 105*ms)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = d.SuspectAt()
	}
}
