package core

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/membership"
)

func TestRejoinPlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	n1 := RejoinMember{Name: "n1", Addr: "10.0.0.1:7946"}
	n3 := RejoinMember{Name: "n3", Addr: "10.0.0.3:7946"}
	live := func(m RejoinMember) RejoinMember { m.Live = true; return m }
	voters := []string{"n1", "n2", "n3"}
	cases := []struct {
		name    string
		in      RejoinInput
		try     []string
		problem string // substring; "" means none
	}{
		{"quorum of voters live: nothing to do",
			RejoinInput{Members: []RejoinMember{live(n1), n3}, Voters: voters, Join: []string{n1.Addr}}, nil, ""},
		{"seed dead, the other unknown: join through every address, cut off",
			RejoinInput{Members: []RejoinMember{n1}, Voters: voters, Join: []string{n1.Addr}, Snapshot: []string{n1.Addr}},
			[]string{n1.Addr}, "reaches 1 of its 3 voters"},
		{"the other known from the snapshot and gossip but not reached",
			RejoinInput{Members: []RejoinMember{n1, n3}, Voters: voters, Join: []string{n1.Addr}, Snapshot: []string{"10.0.0.9:7946"}},
			[]string{n1.Addr, n3.Addr, "10.0.0.9:7946"}, "keeps joining through"},
		{"wiped, no join list, nobody known: says it is alone and why",
			RejoinInput{Voters: voters}, nil, "knows no address to join"},
		{"bully or ring (no voters), alone while the join list names a seed",
			RejoinInput{Join: []string{n1.Addr}}, []string{n1.Addr}, "reaches no other member"},
		{"a single-member cluster is not cut off",
			RejoinInput{Voters: []string{"n2"}}, nil, ""},
		{"its own address is never tried; live voters are joined again, observers not",
			RejoinInput{Members: []RejoinMember{live(n1), n3, live(RejoinMember{Name: "o9", Addr: "10.0.0.9:7946"})},
				Voters: []string{"n1", "n2", "n3", "n4", "n5"}, Join: []string{n1.Addr, "10.0.0.2:7946"}},
			[]string{n1.Addr, n3.Addr}, "reaches 2 of its 5 voters"},
		// A quorum is live and the count never dropped (the window saw
		// no more), but n4 answers gossip and not the transport: a
		// member restarted knowing nobody, which only a join teaches.
		// Not cut off: the live voters, which know this agent, are not
		// joined again (in a fleet every agent would, at every failover).
		{"a member alive in gossip the transport does not reach is joined, counts regardless",
			RejoinInput{Members: []RejoinMember{live(n1), live(n3), {Name: "n4", Addr: "10.0.0.4:7946", Alive: true}},
				Voters: []string{"n1", "n2", "n3", "n4", "n5"}},
			[]string{"10.0.0.4:7946"}, ""},
		{"a voter lost while a quorum is reached: only its address is tried",
			RejoinInput{Members: []RejoinMember{live(n1), {Name: "n3", Addr: n3.Addr, Alive: true}, live(RejoinMember{Name: "o9", Addr: "10.0.0.9:7946"})},
				Voters: voters},
			[]string{n3.Addr}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRejoin(RejoinConfig{Grace: time.Second}, rand.New(rand.NewPCG(1, 2)))
			tc.in.Now, tc.in.Self, tc.in.SelfAddr = t0, "n2", "10.0.0.2:7946"
			p := r.Plan(tc.in)
			if p.Problem != "" {
				t.Errorf("problem %q before the grace period", p.Problem)
			}
			later := tc.in
			later.Now = t0.Add(time.Second)
			if p2 := r.Plan(later); (tc.problem == "") != (p2.Problem == "") || !strings.Contains(p2.Problem, tc.problem) {
				t.Errorf("problem %q after the grace period, want one containing %q", p2.Problem, tc.problem)
			}
			if !slices.Equal(p.Try, tc.try) {
				t.Errorf("try %v, want %v", p.Try, tc.try)
			}
			if !p.Next.After(t0) {
				t.Errorf("next %v, want after now", p.Next)
			}
		})
	}
}

// The pace: a round at once on turning short, then pauses that double
// from Min to Max, each between half and all of the pause; back to a
// round at once after a spell of being well.
func TestRejoinPace(t *testing.T) {
	cfg := RejoinConfig{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond}
	r := NewRejoin(cfg, rand.New(rand.NewPCG(7, 7)))
	now := time.Unix(1000, 0)
	cut := RejoinInput{Self: "n2", Voters: []string{"n1", "n2", "n3"}, Join: []string{"a:1"}}
	var rounds []time.Time
	for range 200 { // 10 ms steps over 2 s
		cut.Now = now
		if p := r.Plan(cut); len(p.Try) > 0 {
			rounds = append(rounds, now)
		}
		now = now.Add(10 * time.Millisecond)
	}
	if len(rounds) < 4 || rounds[0] != time.Unix(1000, 0) {
		t.Fatalf("rounds %v: want the first at once and at least four", rounds)
	}
	pause := cfg.Min
	for i := 1; i < len(rounds); i++ {
		gap := rounds[i].Sub(rounds[i-1])
		if gap < pause/2 || gap > pause+10*time.Millisecond {
			t.Errorf("gap %d: %v, want between %v and %v", i, gap, pause/2, pause)
		}
		pause = min(2*pause, cfg.Max)
	}
	well := cut
	well.Members = []RejoinMember{{Name: "n1", Addr: "a:1", Live: true}}
	well.Now = now
	r.Plan(well)
	cut.Now = now.Add(10 * time.Millisecond)
	if p := r.Plan(cut); len(p.Try) == 0 {
		t.Error("short again after being well: no round at once")
	}
}

// Fewer live members than the most seen within the window (a member that
// reached this agent a minute ago no longer does) is short too, quietly:
// no problem line while a quorum is live.
func TestRejoinRemembersPeak(t *testing.T) {
	r := NewRejoin(RejoinConfig{Window: time.Minute}, rand.New(rand.NewPCG(1, 1)))
	now := time.Unix(1000, 0)
	n1 := RejoinMember{Name: "n1", Addr: "a:1", Live: true}
	n3 := RejoinMember{Name: "n3", Addr: "a:3", Live: true}
	in := RejoinInput{Now: now, Self: "n2", Members: []RejoinMember{n1, n3}, Voters: []string{"n1", "n2", "n3"}}
	if p := r.Plan(in); len(p.Try) != 0 {
		t.Fatalf("all live: try %v", p.Try)
	}
	n1.Live = false // answers gossip, not the transport: restarted wiped
	in.Members, in.Now = []RejoinMember{n1, n3}, now.Add(time.Second)
	p := r.Plan(in)
	if !slices.Equal(p.Try, []string{"a:1"}) || p.Problem != "" {
		t.Fatalf("one of three unreached: try %v problem %q; want a:1 only (n3, live with this node a quorum, is not joined again) and no problem", p.Try, p.Problem)
	}
	in.Now = now.Add(2 * time.Minute)
	r.Plan(in)
	in.Now = now.Add(2*time.Minute + 10*time.Second)
	if p := r.Plan(in); len(p.Try) != 0 {
		t.Errorf("a minute later the peak has passed: try %v", p.Try)
	}
}

// For the window after its start, the members the snapshot holds count as
// seen: a member that was down when this agent started, and comes back
// knowing nobody, is joined though this agent never saw it live.
func TestRejoinSnapshotCountsAtStart(t *testing.T) {
	r := NewRejoin(RejoinConfig{Window: time.Minute}, rand.New(rand.NewPCG(2, 2)))
	now := time.Unix(1000, 0)
	in := RejoinInput{Now: now, Self: "n2", SelfAddr: "a:2", Snapshot: []string{"a:1", "a:2", "a:3", "a:3"},
		Members: []RejoinMember{{Name: "n1", Addr: "a:1", Live: true, Alive: true}, {Name: "n3", Addr: "a:3"}}}
	if p := r.Plan(in); !slices.Equal(p.Try, []string{"a:3"}) || p.Problem != "" {
		t.Fatalf("n3 of the snapshot dead at the start: try %v problem %q, want a:3 and no problem", p.Try, p.Problem)
	}
	in.Now = now.Add(2 * time.Minute)
	if p := r.Plan(in); len(p.Try) != 0 {
		t.Errorf("past the window the snapshot no longer counts: try %v", p.Try)
	}
}

// An agent paced as cut off that is then only short (it reaches some
// members again, fewer than it saw) joins within ShortMax, not after the
// long pause it had grown.
func TestRejoinShortPacesFaster(t *testing.T) {
	cfg := RejoinConfig{Window: time.Minute, Min: 100 * time.Millisecond, Max: 10 * time.Second, ShortMax: time.Second}
	r := NewRejoin(cfg, rand.New(rand.NewPCG(9, 9)))
	now := time.Unix(1000, 0)
	n1 := RejoinMember{Name: "n1", Addr: "a:1", Live: true, Alive: true}
	n3 := RejoinMember{Name: "n3", Addr: "a:3", Live: true, Alive: true}
	in := RejoinInput{Now: now, Self: "n2", Members: []RejoinMember{n1, n3}}
	r.Plan(in)
	in.Members = []RejoinMember{{Name: "n1", Addr: "a:1"}, {Name: "n3", Addr: "a:3"}}
	for range 200 { // 20 s alone: the pause grows to Max
		now = now.Add(100 * time.Millisecond)
		in.Now = now
		r.Plan(in)
	}
	in.Members = []RejoinMember{n1, {Name: "n3", Addr: "a:3"}}
	var rounds []time.Time
	for range 100 { // 10 s short of n3 only
		now = now.Add(100 * time.Millisecond)
		in.Now = now
		if p := r.Plan(in); len(p.Try) > 0 {
			if !slices.Equal(p.Try, []string{"a:3"}) {
				t.Fatalf("short of n3: try %v, want a:3", p.Try)
			}
			rounds = append(rounds, now)
		}
	}
	if len(rounds) < 8 {
		t.Fatalf("rounds while short: %v, want one at least every %v", rounds, cfg.ShortMax)
	}
	for i := 1; i < len(rounds); i++ {
		if gap := rounds[i].Sub(rounds[i-1]); gap > cfg.ShortMax+100*time.Millisecond {
			t.Errorf("gap %d while short: %v, want at most %v", i, gap, cfg.ShortMax)
		}
	}
}

// Plans are a function of the inputs and the generator's seed.
func TestRejoinDeterministic(t *testing.T) {
	run := func() []time.Time {
		r := NewRejoin(RejoinConfig{}, rand.New(rand.NewPCG(3, 4)))
		in := RejoinInput{Self: "n2", Voters: []string{"n1", "n2", "n3"}, Join: []string{"a:1"}}
		var out []time.Time
		for i := range 50 {
			in.Now = time.Unix(0, 0).Add(time.Duration(i) * 100 * time.Millisecond)
			out = append(out, r.Plan(in).Next)
		}
		return out
	}
	if a, b := run(), run(); !slices.Equal(a, b) {
		t.Fatal("two runs with one seed differ")
	}
}

// A loss while short, or an address not tried before, starts the pace
// over: a seed that dies after the others' pause grew long is not waited
// out.
func TestRejoinNewsRestartsPace(t *testing.T) {
	r := NewRejoin(RejoinConfig{Min: 100 * time.Millisecond, Max: 10 * time.Second}, rand.New(rand.NewPCG(5, 5)))
	now := time.Unix(1000, 0)
	in := RejoinInput{Self: "n3", Voters: []string{"n1", "n2", "n3", "n4", "n5"},
		Members: []RejoinMember{{Name: "n1", Addr: "a:1", Live: true}}, Join: []string{"a:1"}}
	for range 300 { // 3 s short: the pause grows past a second
		in.Now = now
		r.Plan(in)
		now = now.Add(10 * time.Millisecond)
	}
	in.Now = now
	in.Members = []RejoinMember{{Name: "n1", Addr: "a:1"}, {Name: "n2", Addr: "a:2"}}
	if p := r.Plan(in); !slices.Equal(p.Try, []string{"a:1", "a:2"}) {
		t.Fatalf("the seed died and n2 became known: try %v, want a:1 and a:2 at once", p.Try)
	}
}

// A member this agent does not reach that shows a new identity restarted
// (with an empty data directory, it knows nobody): a round at once.
func TestRejoinNewIdentityRestartsPace(t *testing.T) {
	r := NewRejoin(RejoinConfig{Min: 100 * time.Millisecond, Max: 10 * time.Second}, rand.New(rand.NewPCG(5, 6)))
	now := time.Unix(1000, 0)
	in := RejoinInput{Self: "n3", Voters: []string{"n1", "n2", "n3"},
		Members: []RejoinMember{{Name: "n1", Addr: "a:1", Identity: "old", Live: true}, {Name: "n2", Addr: "a:2", Live: true}}}
	in.Now = now
	r.Plan(in)
	in.Members[0].Live = false // killed: short of the three it reached
	for range 300 {
		in.Now = now
		r.Plan(in)
		now = now.Add(10 * time.Millisecond)
	}
	in.Now = now
	if p := r.Plan(in); len(p.Try) != 0 {
		t.Fatalf("nothing new 3 s into the pace: try %v", p.Try)
	}
	in.Members[0].Identity = "new"
	in.Now = now.Add(10 * time.Millisecond)
	// n2, live, and with this node a quorum, is not joined again.
	if p := r.Plan(in); !slices.Equal(p.Try, []string{"a:1"}) {
		t.Fatalf("n1 restarted with a new identity: try %v, want a:1 at once", p.Try)
	}
}

// TestRejoinView: a voter (or, in bully, any member) counts as live only
// when the transport reaches it too; an observer of majority is live on
// gossip's word; dead members are listed, not live, for their addresses.
func TestRejoinView(t *testing.T) {
	tn, _ := newTestNode(t, ProtocolMajority) // voters self, a, b, c
	tn.reachable[2] = true
	tn.applyMember(member("a", 2, membership.StateAlive))
	tn.applyMember(member("b", 3, membership.StateAlive)) // not reached
	tn.applyMember(member("c", 4, membership.StateDead))
	tn.applyMember(member("o", 5, membership.StateAlive)) // observer
	voters, ms := tn.RejoinView(tn.now)
	if got := strings.Join(voters, ","); got != "a,b,c,self" && got != "self,a,b,c" {
		t.Errorf("voters %q, want the bootstrap list", got)
	}
	live := map[string]bool{}
	for _, m := range ms {
		live[m.Name] = m.Live
	}
	want := map[string]bool{"a": true, "b": false, "c": false, "o": true}
	if !maps.Equal(live, want) {
		t.Errorf("live %v, want %v", live, want)
	}

	// Reused between asks; names that come and go are kept in order.
	buf := make([]RejoinMember, 0, 8)
	_, ms = tn.RejoinViewInto(tn.now, buf)
	tn.applyMember(member("aa", 6, membership.StateAlive))
	c := member("c", 4, membership.StateReaped)
	tn.applyMember(c)
	_, again := tn.RejoinViewInto(tn.now, ms)
	var names []string
	for _, m := range again {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "a,aa,b,o" {
		t.Errorf("members after aa joined and c was reaped: %s, want a,aa,b,o", got)
	}
	if &again[0] != &buf[:1][0] {
		t.Error("RejoinViewInto did not reuse the buffer it was given")
	}

	bully, _ := newTestNode(t, ProtocolBully)
	bully.applyMember(member("o", 5, membership.StateAlive)) // not reached
	voters, ms = bully.RejoinView(bully.now)
	if voters != nil || len(ms) != 1 || ms[0].Live {
		t.Errorf("bully: voters %v, members %+v; want none, and o not live (every member is a candidate, so the transport must reach it)", voters, ms)
	}
}

// TestRejoinRoundIsBounded: a round joins at most maxRejoinTry
// addresses, a member gossip says is alive but the transport does not
// reach always among them, and successive rounds cover the others.
func TestRejoinRoundIsBounded(t *testing.T) {
	r := NewRejoin(RejoinConfig{Min: 100 * time.Millisecond, Max: time.Second}, rand.New(rand.NewPCG(8, 8)))
	now := time.Unix(1000, 0)
	in := RejoinInput{Self: "o0", Voters: []string{"v1", "v2", "v3"}}
	for _, v := range in.Voters {
		in.Members = append(in.Members, RejoinMember{Name: v, Addr: v + ":1", Live: true, Alive: true})
	}
	for i := 1; i <= 20; i++ { // observers gossip marked dead
		in.Members = append(in.Members, RejoinMember{Name: fmt.Sprintf("o%d", i), Addr: fmt.Sprintf("o%d:1", i)})
	}
	in.Members = append(in.Members, RejoinMember{Name: "wiped", Addr: "wiped:1", Alive: true})
	covered := map[string]bool{}
	rounds := 0
	for range 2000 { // 20 s in 10 ms steps
		in.Now = now
		p := r.Plan(in)
		if len(p.Try) > 0 {
			rounds++
			if len(p.Try) > maxRejoinTry {
				t.Fatalf("a round of %d joins: %v", len(p.Try), p.Try)
			}
			if !slices.Contains(p.Try, "wiped:1") {
				t.Fatalf("round %d left out the member alive in gossip but unreached: %v", rounds, p.Try)
			}
			for _, a := range p.Try {
				covered[a] = true
			}
		}
		now = now.Add(10 * time.Millisecond)
	}
	if len(covered) < 10 {
		t.Errorf("%d rounds covered only %d addresses: %v", rounds, len(covered), slices.Sorted(maps.Keys(covered)))
	}
}

// TestRejoinFlappingKeepsPace: members that flap at every look (an
// overloaded fleet) while a quorum of voters is reached restart the pace
// at most once per ShortMax: the rounds thin out instead of coming every
// Min or sooner.
func TestRejoinFlappingKeepsPace(t *testing.T) {
	cfg := RejoinConfig{Min: 500 * time.Millisecond, Max: 30 * time.Second, ShortMax: 4 * time.Second}
	r := NewRejoin(cfg, rand.New(rand.NewPCG(9, 1)))
	now := time.Unix(1000, 0)
	in := RejoinInput{Self: "o0", Voters: []string{"v1", "v2", "v3"}}
	var rounds []time.Time
	for step := range 2000 { // 20 s in 10 ms steps
		in.Now = now
		in.Members = in.Members[:0]
		for _, v := range in.Voters {
			in.Members = append(in.Members, RejoinMember{Name: v, Addr: v + ":1", Live: true, Alive: true})
		}
		// Every look, one more of the others flaps down, then they
		// come back: a loss each time.
		for i := 1; i <= 50; i++ {
			live := (i+step)%7 != 0
			in.Members = append(in.Members, RejoinMember{Name: fmt.Sprintf("o%d", i), Addr: fmt.Sprintf("o%d:1", i), Live: live, Alive: live})
		}
		if p := r.Plan(in); len(p.Try) > 0 {
			rounds = append(rounds, now)
		}
		now = now.Add(10 * time.Millisecond)
	}
	for i := 1; i < len(rounds); i++ {
		if gap := rounds[i].Sub(rounds[i-1]); gap < cfg.Min/2 {
			t.Fatalf("rounds %d and %d %v apart, under the jittered Min (%v)", i-1, i, gap, cfg.Min/2)
		}
	}
	// Unbounded, a round came every Min: 40 in 20 s.
	if len(rounds) > 25 {
		t.Errorf("%d rounds in 20 s of flapping, want the pace to grow between resets", len(rounds))
	}
}
