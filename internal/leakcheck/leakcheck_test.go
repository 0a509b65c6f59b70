package leakcheck

import (
	"testing"
	"time"
)

func TestWaitSeesALeakAndItsEnd(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	if err := Wait(200 * time.Millisecond); err == nil {
		t.Fatal("a blocked goroutine was not reported")
	}
	close(stop)
	<-done
	if err := Wait(Patience); err != nil {
		t.Fatalf("reported after the goroutine ended: %v", err)
	}
}
