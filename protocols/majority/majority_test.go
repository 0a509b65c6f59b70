package majority

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := New(Config{Voters: []string{"a", "a", ""}, HeartbeatInterval: time.Second, ElectionTimeout: time.Second, MaxClockDrift: 0.7})
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"id must be non-zero", "at most half", "drift", "rand must be set", `"a" listed twice`, "must not be empty", "members must include"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStepRefusesBadInputWithoutChangingState(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	tn.runUntilLeader(10 * time.Second)
	n := tn.Nodes[1]
	before := n.Status(tn.Now)
	hs := n.hardState()
	cases := []struct {
		m    protocols.Message
		want error
	}{
		{protocols.Message{Kind: protocols.MsgInvalid, From: 2, To: 1, Term: 99}, protocols.ErrUnknownKind},
		{protocols.Message{Kind: protocols.MessageKind(200), From: 2, To: 1, Term: 99}, protocols.ErrUnknownKind},
		{protocols.Message{Kind: protocols.MsgCoordinator, From: 2, To: 1, Term: 99}, protocols.ErrUnknownKind},
		{protocols.Message{Kind: protocols.MsgVote, From: 2, To: 3, Term: 99}, protocols.ErrNotAddressed},
		{protocols.Message{Kind: protocols.MsgVote, From: 42, To: 1, Term: 99}, protocols.ErrUnknownSender},
		{protocols.Message{Kind: protocols.MsgVote, From: 1, To: 1, Term: 99}, protocols.ErrUnknownSender},
	}
	for _, c := range cases {
		if err := n.Step(tn.Now, c.m); !errors.Is(err, c.want) {
			t.Errorf("Step(%v) = %v, want %v", c.m, err, c.want)
		}
	}
	if got := n.Status(tn.Now); got != before {
		t.Errorf("status changed by bad input: %+v -> %+v", before, got)
	}
	if n.hardState() != hs || len(n.out.Pending()) != 0 {
		t.Errorf("bad input changed state or queued messages")
	}
}

// A vote reply must travel in the same Ready as the HardState recording the
// vote, so a driver that follows the contract persists it first.
func TestVoteIsInTheReadyThatCarriesTheReply(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	tn.Advance(time.Second) // past the start-up refusal
	n := tn.Nodes[2]
	if err := n.Step(tn.Now, protocols.Message{Kind: protocols.MsgVote, From: 1, To: 2, Term: 5}); err != nil {
		t.Fatal(err)
	}
	rd := n.Ready()
	if rd.HardState == nil || rd.HardState.Vote != 1 || rd.HardState.Term != 5 {
		t.Fatalf("Ready.HardState = %+v, want term 5 vote 1", rd.HardState)
	}
	if len(rd.Messages) != 1 || rd.Messages[0].Kind != protocols.MsgVoteResp || rd.Messages[0].Reject {
		t.Fatalf("Ready.Messages = %v, want one granting VoteResp", rd.Messages)
	}
	n.Advance(rd)
	if n.HasReady() {
		t.Fatalf("Ready left after Advance: %+v", n.Ready())
	}
}

func TestQuorumCountsConfiguredVotersNotTheGossipView(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsafe=%v", unsafe), func(t *testing.T) {
			cfg := baseConfig()
			cfg.Unsafe.QuorumOfGossipView = unsafe
			tn := newTestNet(3, 0, 1, cfg)
			// A formed cluster (configuration index ≥ 1): a fresh one
			// would also need every member's answer to bootstrap.
			if l, _ := tn.runUntilLeader(10 * time.Second); l == protocols.None {
				t.Fatal("no leader")
			}
			tn.Advance(time.Second)
			tn.crash(2)
			tn.crash(3)
			tn.Nodes[1].MemberDown(tn.Now, 2)
			tn.Nodes[1].MemberDown(tn.Now, 3)
			tn.Advance(5 * time.Second) // n1 steps down if it led (check-quorum)
			l, _ := tn.runUntilLeader(10 * time.Second)
			if unsafe && l != 1 {
				t.Fatalf("the broken variant should elect n1 alone; got leader %d", l)
			}
			if !unsafe && l != protocols.None {
				t.Fatalf("n1 elected itself with 1 of 3 configured voters")
			}
		})
	}
}

func TestObserversFollowButNeverVoteOrCampaign(t *testing.T) {
	tn := newTestNet(3, 2, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None || l > 3 {
		t.Fatalf("leader %d, want a voter", l)
	}
	tn.Advance(time.Second)
	for _, id := range []protocols.ID{4, 5} {
		st := tn.Nodes[id].Status(tn.Now)
		if st.Role != protocols.Observer || st.Leader != l {
			t.Errorf("observer %d: %+v, want observer following %d", id, st, l)
		}
		if hs := tn.HS[id]; hs.Vote != protocols.None {
			t.Errorf("observer %d voted: %+v", id, hs)
		}
	}
	// With every voter gone the observers never take over.
	for id := protocols.ID(1); id <= 3; id++ {
		tn.crash(id)
	}
	tn.Advance(10 * time.Second)
	for _, id := range []protocols.ID{4, 5} {
		if st := tn.Nodes[id].Status(tn.Now); st.Role != protocols.Observer || st.Epoch != tn.Nodes[id].term {
			t.Errorf("observer %d: %+v", id, st)
		}
	}
	if tn.Sent[protocols.MsgPreVote] > 10 {
		t.Errorf("observers campaigned: %d pre-votes", tn.Sent[protocols.MsgPreVote])
	}
}

// Suspecting the leader moves the next campaign to the end of the lease
// instead of a random point up to two election timeouts later.
func TestSuspicionBringsTheCampaignForward(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	tn.Advance(500 * time.Millisecond)
	tn.crash(l)
	var follower *Node
	for _, id := range tn.Live() {
		follower = tn.Nodes[id]
		break
	}
	before := follower.electionDeadline
	follower.Suspect(tn.Now, l, true)
	limit := follower.voteBlockUntil.Add(follower.cfg.ElectionTimeout / 2)
	if follower.electionDeadline > limit || follower.electionDeadline < follower.voteBlockUntil {
		t.Fatalf("deadline %v, want within [%v, %v] (was %v)", follower.electionDeadline, follower.voteBlockUntil, limit, before)
	}
}

// The old leader's lease always ends before a new leader can exist: run
// many seeds of an isolated leader and compare the two on the one clock.
func TestIsolatedLeaderLeaseEndsBeforeSuccessorIsElected(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		tn := newTestNet(5, 0, seed, baseConfig())
		old, _ := tn.runUntilLeader(10 * time.Second)
		if old == protocols.None {
			t.Fatalf("seed %d: no leader", seed)
		}
		tn.Advance(time.Duration(seed%7) * 37 * time.Millisecond)
		tn.Isolate(old)
		lease := tn.Nodes[old].leaseUntil
		for i := 0; i < 1000; i++ {
			tn.Advance(testTick)
			for _, id := range tn.Live() {
				st := tn.Nodes[id].Status(tn.Now)
				if id != old && st.Role == protocols.Leader && tn.Now < lease {
					t.Fatalf("seed %d: n%d leads at %v before n%d's lease ends at %v", seed, id, tn.Now, old, lease)
				}
				if id == old && st.Role == protocols.Leader && tn.Now >= lease {
					t.Fatalf("seed %d: old leader reports leader after its lease", seed)
				}
			}
		}
		if tn.leader() == protocols.None {
			t.Fatalf("seed %d: no new leader after 10s", seed)
		}
	}
}

// electOnce runs an uncontested election on n fresh voters: returns the
// messages sent and the virtual time from start to a leader.
func electOnce(n int, seed uint64) (int, time.Duration) {
	tn := newTestNet(n, 0, seed, baseConfig())
	_, d := tn.runUntilLeader(30 * time.Second)
	total := 0
	for _, k := range []protocols.MessageKind{protocols.MsgPreVote, protocols.MsgPreVoteResp, protocols.MsgVote, protocols.MsgVoteResp} {
		total += tn.Sent[k]
	}
	return total, d
}

func TestUncontestedElectionMessageCount(t *testing.T) {
	for _, n := range []int{3, 5, 7, 9} {
		msgs, _ := electOnce(n, 1)
		// PreVote and Vote each ask n-1 peers and get n-1 answers.
		if want := 4 * (n - 1); msgs != want {
			t.Errorf("n=%d: %d election messages, want %d", n, msgs, want)
		}
	}
}

// BenchmarkElection reports the messages of an uncontested election and the
// virtual time from a cold start to a leader (which includes the one
// election timeout a fresh voter waits before it votes).
func BenchmarkElection(b *testing.B) {
	for _, n := range []int{3, 5, 7, 9} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var msgs int
			var virt time.Duration
			for i := 0; i < b.N; i++ {
				m, d := electOnce(n, uint64(i+1))
				msgs += m
				virt += d
			}
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/election")
			b.ReportMetric(float64(virt.Milliseconds())/float64(b.N), "virtual-ms/election")
		})
	}
}

// BenchmarkStep measures the follower's heartbeat path, the message every
// node handles most often.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{3, 9} {
		b.Run(fmt.Sprintf("heartbeat/n=%d", n), func(b *testing.B) {
			tn := newTestNet(n, 0, 1, baseConfig())
			l, _ := tn.runUntilLeader(10 * time.Second)
			var f *Node
			for _, id := range tn.Live() {
				if id != l {
					f = tn.Nodes[id]
					break
				}
			}
			m := protocols.Message{Kind: protocols.MsgHeartbeat, From: l, To: f.id, Term: f.term, Leader: l}
			now := tn.Now
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += protocols.Time(time.Millisecond)
				m.Context = uint64(i)
				if err := f.Step(now, m); err != nil {
					b.Fatal(err)
				}
				f.Advance(f.Ready())
			}
		})
		b.Run(fmt.Sprintf("heartbeat-resp/n=%d", n), func(b *testing.B) {
			tn := newTestNet(n, 0, 1, baseConfig())
			l, _ := tn.runUntilLeader(10 * time.Second)
			leader := tn.Nodes[l]
			from := protocols.ID(1)
			if from == l {
				from = 2
			}
			now := tn.Now
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += protocols.Time(time.Microsecond)
				m := protocols.Message{Kind: protocols.MsgHeartbeatResp, From: from, To: l, Term: leader.term, Context: leader.round}
				if err := leader.Step(now, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestConfirmLeadershipNeedsAFreshQuorumRound(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	leader := tn.Nodes[l]
	var follower protocols.ID = 1
	if follower == l {
		follower = 2
	}
	if _, err := tn.Nodes[follower].ConfirmLeadership(tn.Now); !errors.Is(err, protocols.ErrNotLeader) {
		t.Fatalf("follower ConfirmLeadership = %v, want ErrNotLeader", err)
	}
	// Cut the leader's outbound links: its lease still runs, but no
	// quorum can answer the new round.
	for _, id := range tn.Live() {
		tn.Cut[[2]protocols.ID{l, id}] = true
	}
	tok, err := leader.ConfirmLeadership(tn.Now)
	if err != nil {
		t.Fatal(err)
	}
	tn.Drain(l)
	tn.Deliver()
	if leader.Confirmed(tok) {
		t.Fatal("confirmed without any follower hearing the round")
	}
	tn.Heal()
	tok, err = leader.ConfirmLeadership(tn.Now)
	if err != nil {
		t.Fatal(err)
	}
	tn.Drain(l)
	tn.Deliver()
	if !leader.Confirmed(tok) {
		t.Fatal("not confirmed after a quorum acknowledged the round")
	}
}

// BenchmarkFailover reports the virtual time from a leader's crash to its
// successor's lease, with the election timeout alone and with the agent's
// phi detector suspecting the leader 360 ms after the crash (the mean
// detection time measured in docs/phi.md).
func BenchmarkFailover(b *testing.B) {
	for _, n := range []int{3, 5, 7, 9} {
		for _, suspect := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/suspect=%v", n, suspect), func(b *testing.B) {
				var virt time.Duration
				for i := 0; i < b.N; i++ {
					tn := newTestNet(n, 0, uint64(i+1), baseConfig())
					l, _ := tn.runUntilLeader(30 * time.Second)
					tn.Advance(time.Duration(i%10) * 50 * time.Millisecond)
					tn.crash(l)
					start := tn.Now
					if suspect {
						tn.Advance(360 * time.Millisecond)
						for _, id := range tn.Live() {
							tn.Nodes[id].Suspect(tn.Now, l, true)
						}
					}
					if next, _ := tn.runUntilLeader(30 * time.Second); next == protocols.None {
						b.Fatal("no new leader")
					}
					virt += tn.Now.Sub(start)
				}
				b.ReportMetric(float64(virt.Milliseconds())/float64(b.N), "virtual-ms/failover")
			})
		}
	}
}
