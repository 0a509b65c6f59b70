package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/sim"
	"github.com/conclave-agent/conclave/sim/registry"
)

var smallSizes = []int{3, 5, 9}

// trials runs failover trials of protocol at size n with seeds
// sim.ScheduleSeed(1, i) and checks what every trial must show: a stable
// leader was crashed and every survivor came to follow a new one, in a
// higher epoch.
func trials(t *testing.T, protocol string, n, count int) []sim.FailoverResult {
	t.Helper()
	out := make([]sim.FailoverResult, 0, count)
	for i := range count {
		tr, err := failover(defaultConfig(), protocol, n, sim.ScheduleSeed(1, i))
		if err != nil {
			t.Fatal(err)
		}
		r := tr.res
		if !r.Agreed || r.NewLeader == protocols.None || r.NewLeader == r.Leader || r.NewEpoch <= r.Epoch {
			t.Fatalf("%s N=%d seed %d: no new leader: crashed n%d (epoch %d), agreed=%v on n%d (epoch %d) after %v",
				protocol, n, r.Seed, r.Leader, r.Epoch, r.Agreed, r.NewLeader, r.NewEpoch, r.Elapsed)
		}
		out = append(out, r)
	}
	return out
}

// TestMajorityCounts: a failover needs at least one PreVote and one Vote
// broadcast to the n-1 other voters (the dead leader is not yet reported
// down), so at least 2(n-1) messages. An uncontested one (a single
// pre-candidate and candidate) is exactly the two rounds: n-1 requests
// each, answered by the n-2 live voters — 4(n-1)-2. With 1–2 ms delays
// every request arrives before the leader's first heartbeat could, so no
// response is left out by agreement.
func TestMajorityCounts(t *testing.T) {
	for _, n := range smallSizes {
		uncontested := 0
		for _, r := range trials(t, "majority", n, 10) {
			s, m := r.Sent, electionMsgs(r.Sent)
			if m < int64(2*(n-1)) {
				t.Errorf("N=%d seed %d: %d election messages, fewer than 2(N-1)=%d: %v", n, r.Seed, m, 2*(n-1), s)
			}
			if s[protocols.MsgPreVoteResp] > s[protocols.MsgPreVote] || s[protocols.MsgVoteResp] > s[protocols.MsgVote] {
				t.Errorf("N=%d seed %d: more responses than requests: %v", n, r.Seed, s)
			}
			if s[protocols.MsgPreVote] == int64(n-1) && s[protocols.MsgVote] == int64(n-1) {
				uncontested++
				if m != int64(4*(n-1)-2) {
					t.Errorf("N=%d seed %d: uncontested election sent %d messages, want 4(N-1)-2=%d: %v", n, r.Seed, m, 4*(n-1)-2, s)
				}
			}
		}
		if uncontested == 0 {
			t.Errorf("N=%d: no uncontested election in 10 trials", n)
		}
		t.Logf("majority N=%d: %d/10 uncontested", n, uncontested)
	}
}

// TestBullyBounds: the highest id leads, and after it crashes the next
// highest takes over. The best case is the new coordinator announcing
// itself to the n-2 others; the worst is one election per survivor,
// n(n-1): ELECTION to every higher id, the dead one included, OK from
// every live one, n-1 COORDINATOR. No trial may exceed it: a follower
// runs at most one election per coordinator epoch on ELECTIONs from below
// (bully's vouchesFor), so a late ELECTION no longer sets off waves.
func TestBullyBounds(t *testing.T) {
	for _, n := range smallSizes {
		bullyBounds(t, n, 10)
	}
}

// TestBullyNoStorm is the message-count regression of bully at scale:
// at N = 25 and N = 250 every failover stays within n(n-1) messages.
// Before followers vouched for their coordinator, trials 0–4 of seed 1
// sent up to 885 at N = 25 and 1,466,695 at N = 250 (a mean of 589,510)
// against 600 and 62,250 (docs/bully-ring.md, "Bully's storm at scale").
func TestBullyNoStorm(t *testing.T) {
	bullyBounds(t, 25, 10)
	if testing.Short() {
		t.Skip("N = 250 takes a few seconds")
	}
	bullyBounds(t, 250, 3)
}

func bullyBounds(t *testing.T, n, count int) {
	t.Helper()
	worst, best := int64(n*(n-1)), int64(n-2)
	for _, r := range trials(t, "bully", n, count) {
		s, m := r.Sent, electionMsgs(r.Sent)
		if r.Leader != protocols.ID(n) || r.NewLeader != protocols.ID(n-1) {
			t.Errorf("N=%d seed %d: leaders n%d then n%d, want n%d then n%d", n, r.Seed, r.Leader, r.NewLeader, n, n-1)
		}
		if m < best || m > worst {
			t.Errorf("N=%d seed %d: %d messages, outside the best case %d and the worst n(n-1)=%d: %v", n, r.Seed, m, best, worst, s)
		}
		if s[protocols.MsgOK] > s[protocols.MsgElection] || s[protocols.MsgCoordinator] < int64(n-2) || s[protocols.MsgCoordinator] > int64(n-1) {
			t.Errorf("N=%d seed %d: more OK than ELECTION, or COORDINATOR outside [n-2, n-1]: %v", n, r.Seed, s)
		}
	}
}

// TestRingBounds: the highest survivor wins. LCR sends between n and
// n(n+1)/2+n messages (the winner's id goes once round; at worst every id
// travels as far as the textbook's descending ring, plus the LEADER
// round); HS stays under 8n(1+⌈log₂n⌉)+n.
func TestRingBounds(t *testing.T) {
	for _, n := range smallSizes {
		for _, alg := range []string{"ring", "ring-hs"} {
			lo, hi := int64(n), int64(n*(n+1)/2+n)
			if alg == "ring-hs" {
				lo, hi = int64(n-1), int64(8*n*(1+bits.Len(uint(n-1)))+n)
			}
			for _, r := range trials(t, alg, n, 5) {
				m := electionMsgs(r.Sent)
				if r.Leader != protocols.ID(n) || r.NewLeader != protocols.ID(n-1) {
					t.Errorf("%s N=%d seed %d: leaders n%d then n%d, want n%d then n%d", alg, n, r.Seed, r.Leader, r.NewLeader, n, n-1)
				}
				if m < lo || m > hi {
					t.Errorf("%s N=%d seed %d: %d messages, outside [%d, %d]: %v", alg, n, r.Seed, m, lo, hi, r.Sent)
				}
				if alg == "ring" && r.Sent[protocols.MsgRingElect] < int64(n-1) {
					t.Errorf("ring N=%d seed %d: %d ELECT, but the winner's id alone makes %d hops", n, r.Seed, r.Sent[protocols.MsgRingElect], n-1)
				}
			}
		}
	}
}

// jsonRows runs the command with -json and decodes its rows, with the wall
// clock figures zeroed.
func jsonRows(t *testing.T, args ...string) []Row {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"-json"}, args...), &out, &errb); code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, errb.String())
	}
	var rows []Row
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		r.WallMsPerElection = 0
		rows = append(rows, r)
	}
	return rows
}

// TestEveryTrialElects: one row per protocol and size, every trial elected.
func TestEveryTrialElects(t *testing.T) {
	rows := jsonRows(t, "-sizes", "3,5,9", "-trials", "3", "-fleet=")
	if want := len(registry.Names()) * 3; len(rows) != want {
		t.Fatalf("%d rows, want %d (every bare protocol of the registry at 3 sizes)", len(rows), want)
	}
	for _, r := range rows {
		if r.Trials != 3 || r.Elected != 3 || len(r.Failures) > 0 || r.MsgsPerElection <= 0 ||
			r.VirtualMsMedian <= 0 || r.VirtualMsMax < r.VirtualMsMedian || r.MsgsMin > r.MsgsMax {
			t.Errorf("bad row %+v", r)
		}
	}
}

// TestDeterministic: the same seed gives the same figures and traces; another
// seed gives other traces.
func TestDeterministic(t *testing.T) {
	args := []string{"-sizes", "3,9", "-trials", "2", "-seed", "7"}
	a, b := jsonRows(t, args...), jsonRows(t, args...)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with seed 7 differ:\n%+v\n%+v", a, b)
	}
	c := jsonRows(t, "-sizes", "3,9", "-trials", "2", "-seed", "8")
	for i := range a {
		if a[i].TraceHash == c[i].TraceHash {
			t.Errorf("%s N=%d: seeds 7 and 8 gave the same trace %s", a[i].Protocol, a[i].N, a[i].TraceHash)
		}
	}
}

// TestFullCheckAgrees: the incremental checker and failure-detector feed
// produce exactly the trace of the simulator's full per-event pass.
func TestFullCheckAgrees(t *testing.T) {
	args := []string{"-sizes", "5,9", "-trials", "3"}
	fast, full := jsonRows(t, args...), jsonRows(t, append(args, "-full-check")...)
	if !reflect.DeepEqual(fast, full) {
		t.Fatalf("incremental and full checks differ:\n%+v\n%+v", fast, full)
	}
}

// TestEventLimitStopsRow: a trial that runs out of events ends its row
// with the reason.
func TestEventLimitStopsRow(t *testing.T) {
	rows := jsonRows(t, "-sizes", "25", "-protocols", "bully", "-max-events", "1000")
	if len(rows) != 1 || rows[0].Trials != 1 || rows[0].Elected != 0 ||
		!strings.Contains(strings.Join(rows[0].Failures, "\n"), "event limit") {
		t.Fatalf("rows %+v", rows)
	}
}

// TestStalls: with -stall every survivor freezes together after the
// crash, so no failover ends before the stall does; majority's rows count
// the terms each election took, and the table says what stalled.
func TestStalls(t *testing.T) {
	rows := jsonRows(t, "-sizes", "4", "-trials", "3", "-protocols", "majority,bully", "-stall", "500ms", "-fleet=")
	for _, r := range rows {
		if r.Elected != r.Trials || r.VirtualMsMedian < 500 {
			t.Errorf("bad row %+v", r)
		}
		if (r.Protocol == "majority") != (r.TermsMax >= 1 && r.TermsMedian >= 1) {
			t.Errorf("%s: terms %g (max %d)", r.Protocol, r.TermsMedian, r.TermsMax)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-sizes", "3", "-trials", "1", "-protocols", "majority", "-stall", "500ms", "-stall-nodes", "1", "-stall-every", "1s"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := "Stalls: 1 survivor(s) freeze together for 500ms, 0s after the crash, again every 1s until they agree."; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

func TestMarkdown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-sizes", "3", "-trials", "1", "-protocols", "majority,ring-hs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"heartbeat 50ms, election timeout 200ms", "no phi", "| protocol | N |", "| majority | 3 | 1/1 |", "| ring-hs | 3 | 1/1 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-protocols", "paxos"},
		{"-sizes", "2"},
		{"-sizes", "x"},
		{"-trials", "0"},
		{"-stall", "-1s"},
		{"-stall", "1s", "-stall-nodes", "-1"},
		{"-bogus"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errb.String())
		}
	}
}

// TestMajorityBeyondMaxVotersIsSkipped checks that the default sizes, which
// go past the voter cap, still run: majority rows above protocols.MaxVoters
// are skipped with a word on stderr (the fleet rows cover them), not an
// error that stops the whole table.
func TestMajorityBeyondMaxVotersIsSkipped(t *testing.T) {
	var out, errb bytes.Buffer
	size := strconv.Itoa(protocols.MaxVoters + 1)
	if code := run([]string{"-json", "-protocols", "majority", "-sizes", "3," + size, "-trials", "1", "-fleet="}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(errb.String(), "majority N="+size+" skipped") {
		t.Errorf("stderr %q does not say the row was skipped", errb.String())
	}
	if got := strings.Count(out.String(), `"protocol":"majority"`); got != 1 {
		t.Errorf("%d majority rows, want 1 (N=3):\n%s", got, out.String())
	}
}
