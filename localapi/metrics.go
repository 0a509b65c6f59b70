package localapi

import (
	"cmp"
	"slices"
	"sync"
)

// RequestCount is the number of requests answered on one path with one
// status code. Unknown paths are counted under Path "other", so a client
// probing random paths cannot grow the metric set.
type RequestCount struct {
	Path  string
	Code  int
	Count uint64
}

// RequestCounts returns a snapshot of the request counters, sorted by path
// then code. The agent exports it as a Prometheus counter vector
// (conclave_localapi_requests_total{path,code}); keeping Prometheus out of
// this package keeps the server's dependencies to the standard library.
func (s *Server) RequestCounts() []RequestCount {
	return s.counts.snapshot()
}

type counterKey struct {
	path string
	code int
}

type counters struct {
	mu sync.Mutex
	m  map[counterKey]uint64
}

func (c *counters) inc(path string, code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[counterKey]uint64)
	}
	c.m[counterKey{path, code}]++
}

func (c *counters) snapshot() []RequestCount {
	c.mu.Lock()
	out := make([]RequestCount, 0, len(c.m))
	for k, n := range c.m {
		out = append(out, RequestCount{Path: k.path, Code: k.code, Count: n})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b RequestCount) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Code, b.Code))
	})
	return out
}
