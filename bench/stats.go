package main

import (
	"fmt"
	"slices"
	"time"
)

// summary is the distribution of one series of measured durations.
type summary struct {
	N      int
	Min    time.Duration
	Median time.Duration
	P90    time.Duration
	P99    time.Duration
	Max    time.Duration
	Mean   time.Duration
}

// summarize sorts a copy of ds and reads its percentiles (nearest rank).
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return summary{
		N:      len(s),
		Min:    s[0],
		Median: percentile(s, 50),
		P90:    percentile(s, 90),
		P99:    percentile(s, 99),
		Max:    s[len(s)-1],
		Mean:   total / time.Duration(len(s)),
	}
}

// percentile returns the p-th percentile of sorted s by nearest rank: the
// smallest value with at least p% of the samples at or below it.
func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	rank := int(float64(len(s))*p/100 + 0.999999999)
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// ms formats d in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f ms", f)
	case f >= 10:
		return fmt.Sprintf("%.1f ms", f)
	default:
		return fmt.Sprintf("%.2f ms", f)
	}
}
