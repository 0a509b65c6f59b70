package ratelog

import (
	"testing"
	"time"
)

func TestAllowOncePerIntervalAndCountEverything(t *testing.T) {
	l := New(time.Second)
	t0 := time.Unix(1000, 0)
	if ok, sup := l.Allow(t0); !ok || sup != 0 {
		t.Fatalf("first event: ok=%v suppressed=%d", ok, sup)
	}
	for i := range 300 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			t.Fatalf("event %d within the interval was let through", i)
		}
	}
	ok, sup := l.Allow(t0.Add(time.Second))
	if !ok || sup != 300 {
		t.Fatalf("after the interval: ok=%v suppressed=%d, want true 300", ok, sup)
	}
	if l.Total() != 302 {
		t.Fatalf("Total = %d, want 302", l.Total())
	}
}

func TestSetLimitsEachKeyAndBoundsKeys(t *testing.T) {
	s := NewSet(time.Minute)
	t0 := time.Unix(1000, 0)
	if ok, _ := s.Allow("a", t0); !ok {
		t.Fatal("first a refused")
	}
	if ok, _ := s.Allow("b", t0); !ok {
		t.Fatal("first b refused: keys must not share a limiter")
	}
	if ok, _ := s.Allow("a", t0); ok {
		t.Fatal("second a let through")
	}
	for i := range 1000 {
		s.Allow(string(rune('c'+i)), t0)
	}
	if len(s.m) > maxKeys+1 {
		t.Fatalf("set grew to %d keys", len(s.m))
	}
}
