package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestFleetRows: a fleet row takes its election figures from the voters'
// row and adds the gossip spread; every member that learns the
// announcement sends it exactly 4·⌈log10(N+1)⌉ times, so the packets per
// member are exact when every member is reached.
func TestFleetRows(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-json", "-protocols", "majority", "-sizes", "5", "-trials", "3", "-fleet", "100,1000"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []Row
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 || rows[0].Voters != 0 || rows[1].Voters != 5 || rows[1].N != 100 || rows[2].N != 1000 {
		t.Fatalf("rows %+v", rows)
	}
	voters := rows[0]
	for _, r := range rows[1:] {
		if r.MsgsPerElection != voters.MsgsPerElection || r.Elected != voters.Elected {
			t.Errorf("N=%d: election figures %v/%d differ from the voters' %v/%d", r.N, r.MsgsPerElection, r.Elected, voters.MsgsPerElection, voters.Elected)
		}
		if r.GossipMissed == 0 {
			want := retransmitMult * math.Ceil(math.Log10(float64(r.N+1)))
			if r.GossipPacketsPerMember != want {
				t.Errorf("N=%d: %.2f packets per member, want %.0f", r.N, r.GossipPacketsPerMember, want)
			}
		}
		if r.VirtualMsMedian <= r.GossipMsMedian || r.GossipMsMedian <= 0 {
			t.Errorf("N=%d: crash to agreement %.0f ms is not failover plus gossip %.0f ms", r.N, r.VirtualMsMedian, r.GossipMsMedian)
		}
	}
}

func TestSpreadIsDeterministic(t *testing.T) {
	a := simulateSpread(500, 7, time.Millisecond, 2*time.Millisecond)
	b := simulateSpread(500, 7, time.Millisecond, 2*time.Millisecond)
	if a != b || a.reached == 0 {
		t.Fatalf("same seed, different spreads: %+v %+v", a, b)
	}
}

func TestFleetBadInput(t *testing.T) {
	for _, args := range [][]string{{"-fleet", "5"}, {"-fleet-voters", "2"}, {"-fleet", "x"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errb.String())
		}
	}
}
