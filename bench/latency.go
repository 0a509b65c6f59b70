package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// latencyResult is /v1/status answered at one fixed request rate.
type latencyResult struct {
	Rate     int           `json:"rate"`
	Target   string        `json:"target"` // "leader" or "follower"
	Duration time.Duration `json:"duration_ns"`
	Sent     int           `json:"sent"`
	Errors   int           `json:"errors"`
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	P999     time.Duration `json:"p999_ns"`
	Max      time.Duration `json:"max_ns"`
	// Service* count from when a worker actually sent the request, leaving
	// out the load generator's own lateness; the figures above include it.
	ServiceP50 time.Duration `json:"service_p50_ns"`
	ServiceP99 time.Duration `json:"service_p99_ns"`
	// Late is how many requests left more than 1 ms after their scheduled
	// time (the load generator or the machine fell behind).
	Late int `json:"late"`
	// Starved is how many requests found every worker busy waiting for
	// the agent: then even the service figures hide a queue.
	Starved int `json:"starved"`
}

// measureStatusLatency starts a 5-agent cluster at default settings and
// sends GET /v1/status to the leader and then to a follower at each rate,
// open loop: requests are scheduled at fixed intervals whatever the
// answers do, and latency counts from the scheduled time, so a stall is
// charged to every request it delays (no coordinated omission).
func measureStatusLatency(ctx context.Context, o *options, rates []int, d time.Duration) ([]latencyResult, error) {
	dir := filepath.Join(o.work, "latency")
	c, err := newCluster(ctx, clusterSpec{Bin: o.agentBin, Dir: dir, N: 5, Protocol: "majority", Profile: defaultProfile})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	ag, err := c.waitStable(formWait, stableHold)
	if err != nil {
		return nil, err
	}
	leader := c.index(ag.Leader)
	follower := (leader + 1) % len(c.agents)
	var out []latencyResult
	for _, rate := range rates {
		for _, target := range []struct {
			name string
			i    int
		}{{"leader", leader}, {"follower", follower}} {
			r := openLoop(ctx, c.agents[target.i].http, rate, d)
			r.Target = target.name
			o.logf("status latency %s at %d/s: p50 %s p99 %s p99.9 %s max %s; service p50 %s p99 %s; %d late, %d starved (%d sent, %d errors)",
				target.name, rate, ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Max), ms(r.ServiceP50), ms(r.ServiceP99), r.Late, r.Starved, r.Sent, r.Errors)
			out = append(out, r)
		}
	}
	return out, nil
}

// openLoop sends GET /v1/status at rate per second for d and returns the
// latency distribution, measured from each request's scheduled time.
func openLoop(ctx context.Context, hc *http.Client, rate int, d time.Duration) latencyResult {
	res := latencyResult{Rate: rate, Duration: d}
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	// Unbuffered: a send succeeds at once only when a worker is idle, so
	// the dispatcher can tell when the agent's slowness (all workers busy)
	// delays a request.
	jobs := make(chan time.Time)
	lat := make([]time.Duration, 0, total)
	svc := make([]time.Duration, 0, total)
	var mu sync.Mutex
	var wg sync.WaitGroup
	workers := 64
	// Warm the connection pool so the first second does not measure dials.
	for range workers {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/v1/status", nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for due := range jobs {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/v1/status", nil)
				sent := time.Now()
				resp, err := hc.Do(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				took := time.Since(due)
				service := time.Since(sent)
				mu.Lock()
				if sent.Sub(due) > time.Millisecond {
					res.Late++
				}
				if ok {
					lat = append(lat, took)
					svc = append(svc, service)
				} else {
					res.Errors++
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		select {
		case jobs <- due:
		default:
			res.Starved++
			jobs <- due
		}
		res.Sent++
	}
	close(jobs)
	wg.Wait()
	s := summarize(lat)
	res.P50, res.P90, res.P99, res.Max = s.Median, s.P90, s.P99, s.Max
	if len(lat) > 0 {
		res.P999 = percentileOf(lat, 99.9)
	}
	sv := summarize(svc)
	res.ServiceP50, res.ServiceP99 = sv.Median, sv.P99
	return res
}

// percentileOf sorts a copy of ds and reads its p-th percentile.
func percentileOf(ds []time.Duration, p float64) time.Duration {
	c := slices.Clone(ds)
	slices.Sort(c)
	return percentile(c, p)
}
