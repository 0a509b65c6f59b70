package core

import (
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

func TestCoalescedWake(t *testing.T) {
	ms := func(x int) protocols.Time { return protocols.Time(time.Duration(x) * time.Millisecond) }
	for _, tc := range []struct {
		wakes []protocols.Time
		want  protocols.Time
	}{
		{nil, 0},
		{[]protocols.Time{ms(50)}, ms(50)},
		{[]protocols.Time{ms(50), ms(55), ms(58)}, ms(58)},
		{[]protocols.Time{ms(58), ms(50), ms(61)}, ms(58)}, // 61 is beyond 50+10
		{[]protocols.Time{ms(50), ms(90)}, ms(50)},
	} {
		if got := CoalescedWake(tc.wakes, 10*time.Millisecond); got != tc.want {
			t.Errorf("CoalescedWake(%v) = %v, want %v", tc.wakes, got, tc.want)
		}
	}
	if WakeSlack(100*time.Millisecond) != 10*time.Millisecond {
		t.Errorf("WakeSlack(100ms) = %v", WakeSlack(100*time.Millisecond))
	}
}
