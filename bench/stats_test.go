package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	want := summary{N: 100, Min: time.Millisecond, Median: 50 * time.Millisecond, P90: 90 * time.Millisecond,
		P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond}
	if s != want {
		t.Fatalf("summarize = %+v, want %+v", s, want)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("summarize reordered its input")
	}
	if got := summarize([]time.Duration{7}); got.Median != 7 || got.P99 != 7 {
		t.Fatalf("one sample: %+v", got)
	}
	if got := summarize(nil); got.N != 0 {
		t.Fatalf("no samples: %+v", got)
	}
}

func TestMs(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Microsecond:  "1.50 ms",
		25 * time.Millisecond:    "25.0 ms",
		1850 * time.Millisecond:  "1850 ms",
		150*time.Millisecond + 1: "150 ms",
	} {
		if got := ms(d); got != want {
			t.Errorf("ms(%v) = %q, want %q", d, got, want)
		}
	}
}
