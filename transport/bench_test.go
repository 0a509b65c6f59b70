package transport

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
)

func quiet(c *Config) { c.Logger = zap.NewNop() }

func benchPair(b *testing.B, mod ...func(*Config)) (*testHost, *testHost) {
	b.Helper()
	mod = append([]func(*Config){quiet}, mod...)
	x, y := newTestHost(b, 1, testKey, mod...), newTestHost(b, 2, testKey, mod...)
	admit(b, x, y)
	admit(b, y, x)
	// Open both streams before measuring.
	x.Send(2, msg(protocols.MsgHeartbeat, 1, 2, 0))
	recv(b, y)
	y.Send(1, msg(protocols.MsgHeartbeatResp, 2, 1, 0))
	recv(b, x)
	return x, y
}

// BenchmarkRoundTrip measures heartbeat → response over existing streams
// and reports the latency distribution.
func BenchmarkRoundTrip(b *testing.B) {
	x, y := benchPair(b)
	done := make(chan struct{})
	go func() { // y echoes
		defer close(done)
		for m := range y.Inbound() {
			y.Send(1, msg(protocols.MsgHeartbeatResp, 2, 1, m.Context))
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		x.Send(2, msg(protocols.MsgHeartbeat, 1, 2, uint64(i)))
		if m := recv(b, x); m.Context != uint64(i) {
			b.Fatalf("got %v", m)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	y.Close()
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkOneWay measures messages per second from one host to another,
// with a window so the bounded queues never drop.
func BenchmarkOneWay(b *testing.B) {
	const window = 512
	x, y := benchPair(b, func(c *Config) { c.QueueLen = 2 * window; c.InboundLen = 2 * window })
	b.ResetTimer()
	start := time.Now()
	received := 0
	for i := range b.N {
		for i-received >= window {
			recv(b, y)
			received++
		}
		x.Send(2, msg(protocols.MsgHeartbeat, 1, 2, uint64(i)))
	}
	for received < b.N {
		recv(b, y)
		received++
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if d := x.Stats().Dropped; len(d) != 0 {
		b.Fatalf("dropped %v", d)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkHostMemory reports the heap one host costs in a full mesh of n
// hosts with every stream open.
func BenchmarkHostMemory(b *testing.B) {
	for _, n := range []int{5, 20} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			var perHost float64
			for range b.N {
				perHost = meshHeapPerHost(b, n)
			}
			b.ReportMetric(perHost, "heap-bytes/host")
		})
	}
}

func meshHeapPerHost(b *testing.B, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	hosts := make([]*Host, n)
	for i := range hosts {
		h, err := New(b.Context(), Config{DataDir: b.TempDir(), Listen: "/ip4/127.0.0.1/tcp/0",
			ClusterKey: testKey, Self: protocols.ID(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		hosts[i] = h
	}
	for _, x := range hosts {
		for _, y := range hosts {
			if x != y {
				if err := x.SetPeer(y.cfg.Self, y.PeerID(), y.Addrs()[0]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, x := range hosts {
		for _, y := range hosts {
			if x != y {
				x.Send(y.cfg.Self, msg(protocols.MsgHeartbeat, x.cfg.Self, y.cfg.Self, 0))
			}
		}
	}
	for _, y := range hosts {
		for range n - 1 {
			select {
			case <-y.Inbound():
			case <-time.After(waitLimit):
				b.Fatalf("mesh incomplete: %+v", y.Stats())
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, h := range hosts {
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
