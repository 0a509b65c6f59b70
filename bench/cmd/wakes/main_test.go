package main

import (
	"bytes"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// TestCountWakesNamesTimerAndWaker traces a goroutine woken by its timer
// and one woken by another goroutine, and checks that each wake-up is
// counted under where it waited and who woke it.
func TestCountWakesNamesTimerAndWaker(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace: %v", err)
	}
	const n = 20
	done := make(chan struct{}, 2)
	go wakeTestTimer(n, done)
	ch := make(chan int)
	go wakeTestReceiver(ch, n, done)
	wakeTestSender(ch, n)
	<-done
	<-done
	trace.Stop()

	rep, err := countWakes(&buf, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var timer, woken int
	for c, k := range rep.Wakes {
		if strings.Contains(c, "wakeTestTimer") && strings.HasSuffix(c, "← timer or network") {
			timer += k
		}
		if strings.Contains(c, "wakeTestReceiver") && strings.Contains(c, "← wakes.wakeTestSender") {
			woken += k
		}
	}
	if timer < n || woken < n/2 {
		t.Fatalf("timer wakes %d (want ≥ %d), receiver woken by the sender %d (want ≥ %d); report %+v", timer, n, woken, n/2, rep)
	}
	if rep.Seconds <= 0 || rep.ProcWakes == 0 {
		t.Fatalf("report %+v: no duration or no processor wake-ups", rep)
	}
	named, procs := 0, 0
	for c, k := range rep.ProcCauses {
		procs += k
		if strings.Contains(c, "wakeTest") {
			named += k
		}
	}
	if procs > rep.ProcWakes || named == 0 {
		t.Fatalf("processor wake-ups by cause %v: %d in all (of %d), %d named after the test's goroutines (want > 0)", rep.ProcCauses, procs, rep.ProcWakes, named)
	}
	var out bytes.Buffer
	rep.print(&out, 5)
	if !strings.Contains(out.String(), "processor wake-ups") {
		t.Fatalf("print: %s", out.String())
	}
}

// A goroutine that waits on a timer n times.
func wakeTestTimer(n int, done chan<- struct{}) {
	for range n {
		tm := time.NewTimer(time.Millisecond)
		<-tm.C
	}
	done <- struct{}{}
}

// A goroutine that waits for n values.
func wakeTestReceiver(ch <-chan int, n int, done chan<- struct{}) {
	for range n {
		<-ch
	}
	done <- struct{}{}
}

// wakeTestSender sends n values, pausing so the receiver waits each time.
func wakeTestSender(ch chan<- int, n int) {
	for i := range n {
		time.Sleep(2 * time.Millisecond)
		ch <- i
	}
}

// TestCountWakesRefusesGarbage: a file that is no trace is an error, not
// a panic or an empty report.
func TestCountWakesRefusesGarbage(t *testing.T) {
	if _, err := countWakes(strings.NewReader("not a trace"), 0, 0); err == nil {
		t.Fatal("no error for a file that is not a trace")
	}
}
