package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// This file is the rejoin policy: when an agent that sees fewer live
// members than it needs joins gossip again, through which addresses, and
// how often. Memberlist joins once at start; a node that joined through a
// single seed learns the others only from that seed's gossip, so if the
// seed dies first the nodes stay apart until it returns (bully and ring
// elect twice, majority has no quorum), and a node restarted with no
// member snapshot and no gossip.join waits for a push-pull that never
// comes. The shell performs the joins; everything here is a pure function
// of its inputs and a seeded generator, so it is tested by tables.

// Rejoin defaults (RejoinConfig's zero values).
const (
	// DefaultRejoinWindow is how far back the largest live count counts
	// as what this agent should see.
	DefaultRejoinWindow = time.Minute
	// DefaultRejoinMin is the first pause between rejoin rounds; it
	// doubles each round up to DefaultRejoinMax.
	DefaultRejoinMin = 500 * time.Millisecond
	// DefaultRejoinMax bounds the pause while cut off: a node cut off
	// for good costs one round of joins every 30 s at most.
	DefaultRejoinMax = 30 * time.Second
	// DefaultRejoinShortMax bounds the pause while short but not cut
	// off (a member it reached within the window is gone). Such a round
	// joins only the addresses of members not live, and lasts at most
	// the window; and a member that came back knowing nobody (its data
	// directory wiped, no gossip.join) hears of this agent from nothing
	// but such a join, so the pause bounds how long it stays alone
	// (up to 30 s under Max alone, if the agent had been cut off first).
	DefaultRejoinShortMax = 4 * time.Second
	// DefaultRejoinGrace is how long an agent must have been cut off
	// before its status says so: at start, and after a member restarts,
	// the transport takes a moment to reach the others.
	DefaultRejoinGrace = 2 * time.Second
)

// RejoinConfig tunes Rejoin. Zero values take the defaults above.
type RejoinConfig struct {
	Window   time.Duration
	Min, Max time.Duration
	// ShortMax bounds the pause while short but not cut off; at most
	// Max.
	ShortMax time.Duration
	Grace    time.Duration
}

// RejoinMember is a member gossip lists, in any state.
type RejoinMember struct {
	Name string
	Addr string // gossip address, host:port
	// Live: alive in gossip and reached by the transport. A member that
	// answers gossip's pings but not the transport (it restarted with a
	// new identity and knows nobody) is not live: it is the one to join.
	Live bool
	// Alive: alive or suspect in gossip, reached or not. A member Alive
	// but not Live answers gossip's probes while the transport does not
	// reach it; if it restarted knowing nobody, no member will teach it
	// this agent unless one joins it, so it makes this agent short
	// whatever the live counts say.
	Alive bool
	// Identity is the member's current identity (its transport peer id):
	// a member not live that shows a new one has restarted, and is joined
	// at once.
	Identity string
}

// RejoinInput is what the shell knows at Now.
type RejoinInput struct {
	Now time.Time
	// Self is this agent's name, SelfAddr its gossip address.
	Self, SelfAddr string
	// Members are the members gossip lists, this agent excluded, dead
	// and left ones included (their addresses are worth a try).
	Members []RejoinMember
	// Voters is this agent's voter list (election.voters, or the
	// configuration in use); empty where every member is a candidate
	// (bully, ring), which turns the quorum rule off.
	Voters []string
	// Join is gossip.join; Snapshot the gossip addresses of the member
	// snapshot this agent started with.
	Join, Snapshot []string
}

// RejoinPlan is Rejoin's answer.
type RejoinPlan struct {
	// Try are the addresses to join now, sorted; empty when no round is
	// due.
	Try []string
	// Next is when to ask again at the latest.
	Next time.Time
	// Problem is a line for the status's problems once this agent has
	// been cut off for the grace period (it reaches fewer than a quorum
	// of its voters, or no other member at all while it knows of some),
	// "" otherwise.
	Problem string
}

// Rejoin decides when an agent joins gossip again. It is not safe for
// concurrent use.
type Rejoin struct {
	cfg RejoinConfig
	rng *rand.Rand
	// seen are the live counts observed within the window, oldest first.
	seen []sample
	// started is the first plan's time and expect the live count the
	// snapshot promised then (snapshotCount), which counts as seen for
	// the window after it.
	started time.Time
	expect  int
	// pause is the current pause between rounds; due the next round.
	pause time.Duration
	due   time.Time
	short bool
	// lastRound is when the last round was handed out, lastReset when
	// news last started the pace over (rate-limited: see Plan).
	lastRound, lastReset time.Time
	// cutSince is when the problem line's condition last turned true;
	// zero while it is false.
	cutSince time.Time
	// live and try are the last plan's live count and addresses, and
	// idents the identities of the members that were not live: a loss,
	// an address not tried before, or a member not live with a new
	// identity starts the pace over.
	live   int
	try    []string
	idents map[string]string
	// liveNames, liveAddrs and spare are scratch maps kept between
	// plans: a shell asks every 100 ms, and the simulator runs one per
	// node of every schedule.
	liveNames, liveAddrs map[string]bool
	spare                map[string]string
}

type sample struct {
	at   time.Time
	live int
}

// NewRejoin returns a Rejoin drawing its jitter from rng.
func NewRejoin(cfg RejoinConfig, rng *rand.Rand) *Rejoin {
	if cfg.Window <= 0 {
		cfg.Window = DefaultRejoinWindow
	}
	if cfg.Min <= 0 {
		cfg.Min = DefaultRejoinMin
	}
	if cfg.Max < cfg.Min {
		cfg.Max = max(DefaultRejoinMax, cfg.Min)
	}
	if cfg.ShortMax < cfg.Min {
		cfg.ShortMax = max(DefaultRejoinShortMax, cfg.Min)
	}
	cfg.ShortMax = min(cfg.ShortMax, cfg.Max)
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultRejoinGrace
	}
	return &Rejoin{cfg: cfg, rng: rng}
}

// Plan takes the shell's view at in.Now and returns what to do.
//
// A round also joins the live voters again (every live member where all
// are candidates): gossip may list a member that does not list this
// agent — two nodes that joined one seed at once, where only the second
// learned of the first before the seed died — and a join is a push-pull
// that teaches it this agent. Observers are left out, so a fleet's loss
// costs each agent a join per voter, not per member.
//
// This agent is short of members when the live ones, itself included, are
// fewer than a quorum of its voters, or fewer than the most it saw live
// within the window (a member it reached a minute ago is gone or no
// longer reaches it; within the window after its start, the members its
// snapshot holds count as seen), or when it is alone while gossip, gossip.join,
// the snapshot or its voter list name others, or when gossip says a
// member is alive that the transport does not reach. While short, it joins
// through the addresses it knows but those of live members, at most
// maxRejoinTry a round (pick) —
// gossip.join, the snapshot, members gossip lists as dead, left or
// unreached — at once when it turns short, loses another member, learns
// an address it has not tried or sees a member it does not reach restart
// with a new identity, then after a pause that doubles from Min to Max
// while cut off and to ShortMax while only short, each drawn between
// half and all of it so that agents short together do not join in step.
func (r *Rejoin) Plan(in RejoinInput) RejoinPlan {
	live := 1
	if r.liveNames == nil {
		r.liveNames, r.liveAddrs = make(map[string]bool), make(map[string]bool)
	}
	liveNames, liveAddrs := r.liveNames, r.liveAddrs
	clear(liveNames)
	clear(liveAddrs)
	liveNames[in.Self], liveAddrs[in.SelfAddr] = true, true
	for _, m := range in.Members {
		if m.Live && m.Name != in.Self {
			live++
			liveNames[m.Name] = true
			liveAddrs[m.Addr] = true
		}
	}
	peak := r.observe(in.Now, live)
	if r.started.IsZero() {
		r.started, r.expect = in.Now, snapshotCount(in)
	}
	if in.Now.Sub(r.started) <= r.cfg.Window {
		// For the window after its start, an agent expects the members
		// its snapshot held: one that was down when this agent started
		// and came back knowing nobody (wiped, no gossip.join) is never
		// seen live here, so the live counts alone never miss it.
		peak = max(peak, r.expect)
	}

	quorumShort := false
	liveVoters := 0
	if len(in.Voters) > 0 {
		for _, v := range in.Voters {
			if liveNames[v] {
				liveVoters++
			}
		}
		quorumShort = liveVoters < len(in.Voters)/2+1
	}
	// Alone while gossip or the files name others (a bully or ring
	// agent has no voter list to count).
	alone := live == 1 && (len(in.Members) > 0 || len(in.Join) > 0 || len(in.Snapshot) > 0 || len(in.Voters) > 1)
	// A member gossip says is alive that the transport does not reach:
	// the live count may never have seen it live (another member was
	// away meanwhile), so the counts alone would leave it cut off.
	unreached := slices.ContainsFunc(in.Members, func(m RejoinMember) bool { return m.Alive && !m.Live })
	short := quorumShort || alone || live < peak || unreached
	if !quorumShort && !alone {
		r.cutSince = time.Time{}
	} else if r.cutSince.IsZero() {
		r.cutSince = in.Now
	}
	if !short {
		// Not cut off either (cut off implies short): no problem line.
		// The pause is kept: it starts over when this agent turns short
		// again, at most once per ShortMax (below).
		r.short, r.live, r.try = false, live, nil
		return RejoinPlan{Next: in.Now.Add(r.cfg.Min)}
	}

	var try []string
	for _, group := range [][]string{in.Join, in.Snapshot} {
		try = append(try, group...)
	}
	var again []string // live voters: joined again so they know this agent
	for _, m := range in.Members {
		switch {
		case !m.Live:
			try = append(try, m.Addr)
		case len(in.Voters) == 0 || slices.Contains(in.Voters, m.Name):
			again = append(again, m.Addr)
		}
	}
	try = slices.DeleteFunc(try, func(a string) bool { return a == "" || liveAddrs[a] })
	if quorumShort || alone {
		// Only while cut off. An agent that merely lost a member (a
		// leader killed, an observer gone) reaches its voters, and a
		// voter it reaches knows it (the transport admits only members
		// gossip lists); joining them again there made every agent of a
		// fleet push-pull its whole member list with each surviving
		// voter at every failover, while they had to elect.
		try = append(try, again...)
	}
	try = slices.DeleteFunc(try, func(a string) bool { return a == "" || a == in.SelfAddr })
	slices.Sort(try)
	try = slices.Compact(try)

	var plan RejoinPlan
	if !r.cutSince.IsZero() && in.Now.Sub(r.cutSince) >= r.cfg.Grace {
		plan.Problem = problem(in, quorumShort, liveVoters, try)
	}
	news := live < r.live || slices.ContainsFunc(try, func(a string) bool { return !slices.Contains(r.try, a) })
	identNews := false
	idents := r.spare
	if idents == nil {
		idents = make(map[string]string)
	}
	clear(idents)
	for _, m := range in.Members {
		if !m.Live && m.Identity != "" {
			idents[m.Name] = m.Identity
			if old, ok := r.idents[m.Name]; ok && old != m.Identity {
				identNews = true
			}
		}
	}
	r.live, r.try, r.idents, r.spare = live, try, idents, r.idents
	// Just turned short, lost a member, learned an address or saw a
	// member it does not reach restart: a round now (never within Min of
	// the last), and the pace starts over. While only short (a quorum of
	// voters reached), turning short or losing a member starts it over at
	// most once per ShortMax: in an overloaded fleet members flap all the
	// time, and starting over at each flap made every observer push-pull
	// the whole member list several times a second, which overloaded it
	// further (250 agents on 2 cores never elected). A new identity, or
	// any news while cut off, starts it over at once.
	cut := quorumShort || alone
	if identNews || ((!r.short || news) && (cut || r.lastReset.IsZero() || in.Now.Sub(r.lastReset) >= r.cfg.ShortMax)) {
		r.due, r.pause, r.lastReset = in.Now, 0, in.Now
		if !r.lastRound.IsZero() {
			r.due = later(in.Now, r.lastRound.Add(r.cfg.Min))
		}
	}
	r.short = true
	limit := r.cfg.Max
	if !quorumShort && !alone {
		limit = r.cfg.ShortMax
	}
	if r.pause > limit {
		// Paced as cut off, now only short: a round within the shorter
		// bound, and the pace goes on from there.
		r.pause = limit
		if r.due.After(in.Now.Add(limit)) {
			r.due = in.Now.Add(r.jitter(limit))
		}
	}
	if in.Now.Before(r.due) {
		plan.Next = r.due
		return plan
	}
	plan.Try = r.pick(try, in.Members)
	r.lastRound = in.Now
	if r.pause == 0 {
		r.pause = r.cfg.Min
	} else {
		r.pause = min(2*r.pause, limit)
	}
	r.due = in.Now.Add(r.jitter(r.pause))
	plan.Next = r.due
	return plan
}

// maxRejoinTry bounds the joins of one round. One push-pull with any
// member teaches everything it knows, so more joins per round add little
// but cost: each carries the whole member list both ways, and an
// overloaded fleet of 250 whose observers each joined every member they
// had seen flap spent its CPU on push-pulls instead of elections.
const maxRejoinTry = 3

// pick returns at most maxRejoinTry of try (sorted): first the members
// gossip says are alive that the transport does not reach (a member that
// restarted knowing nobody waits for exactly such a join), then a random
// draw of the rest, so that successive rounds cover them all.
func (r *Rejoin) pick(try []string, members []RejoinMember) []string {
	if len(try) <= maxRejoinTry {
		return try
	}
	out := make([]string, 0, maxRejoinTry)
	for _, m := range members {
		if len(out) < maxRejoinTry && m.Alive && !m.Live && slices.Contains(try, m.Addr) && !slices.Contains(out, m.Addr) {
			out = append(out, m.Addr)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(try), func(a string) bool { return slices.Contains(out, a) })
	for len(out) < maxRejoinTry && len(rest) > 0 {
		i := r.rng.IntN(len(rest))
		out = append(out, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	slices.Sort(out)
	return out
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// jitter draws a wait between half and all of pause, so that agents
// short together do not join in step.
func (r *Rejoin) jitter(pause time.Duration) time.Duration {
	return pause/2 + time.Duration(r.rng.Int64N(int64(pause/2)+1))
}

// snapshotCount is the members in's snapshot names, this agent
// included: the live count it should see once it has joined them.
func snapshotCount(in RejoinInput) int {
	n := 1
	for i, a := range in.Snapshot {
		if a != "" && a != in.SelfAddr && !slices.Contains(in.Snapshot[:i], a) {
			n++
		}
	}
	return n
}

// observe records live at now and returns the most seen within the
// window, now included.
func (r *Rejoin) observe(now time.Time, live int) int {
	cut := 0
	for cut < len(r.seen) && now.Sub(r.seen[cut].at) > r.cfg.Window {
		cut++
	}
	r.seen = append(r.seen[cut:], sample{now, live})
	peak := 0
	for _, s := range r.seen {
		peak = max(peak, s.live)
	}
	return peak
}

// problem is the status line while this agent is cut off: short of a
// quorum of its voters, or alone while gossip or its files name others.
func problem(in RejoinInput, quorumShort bool, liveVoters int, try []string) string {
	var what string
	if quorumShort {
		what = fmt.Sprintf("this agent is cut off: it reaches %d of its %d voters, fewer than a quorum", liveVoters, len(in.Voters))
	} else {
		what = "this agent is cut off: it reaches no other member"
	}
	if len(try) == 0 {
		return what + "; it knows no address to join (gossip.join is empty, the member snapshot is empty or missing, gossip lists no other member): list a member in gossip.join, or wait for a member that lists this one to join it"
	}
	return what + "; it keeps joining through " + strings.Join(try, ", ") + " (gossip.join, the member snapshot and members seen before); check the network between them"
}

// RejoinView is the part of a RejoinInput this node knows: the voters of
// the configuration in force (nil where every member is a candidate) and
// every other member gossip lists, with whether it is live. A voter, and
// every member where all are candidates, must also be reached by the
// transport to count as live: a member that restarted with a new
// identity answers gossip but knows nobody. An observer of majority is
// not probed by every member, so gossip vouches for it.
func (n *Node) RejoinView(now protocols.Time) (voters []string, members []RejoinMember) {
	return n.RejoinViewInto(now, nil)
}

// RejoinViewInto is RejoinView appending the members to buf[:0], so that
// a shell asking every 100 ms reuses one slice: with hundreds of members
// the view was an observer's largest allocation. The member names are
// kept sorted between membership changes.
func (n *Node) RejoinViewInto(now protocols.Time, buf []RejoinMember) (voters []string, members []RejoinMember) {
	if _, ok := n.voterChanger(); ok {
		// The configuration in use: the bootstrap list until a cluster
		// forms, then the newest one this node holds.
		voters = n.proto.Status(now).Config.VoterList()
		if voters == nil {
			voters = []string{}
		}
	}
	if n.rejoinNames == nil || len(n.rejoinNames) != len(n.members) {
		n.rejoinNames = n.rejoinNames[:0]
		for name := range n.members {
			n.rejoinNames = append(n.rejoinNames, name)
		}
		slices.Sort(n.rejoinNames)
	}
	members = buf[:0]
	for _, name := range n.rejoinNames {
		if name == n.self.Name {
			continue
		}
		m := n.members[name]
		live := isLive(m)
		if live && (voters == nil || slices.Contains(voters, name)) {
			live = n.reached(m)
		}
		members = append(members, RejoinMember{Name: name, Addr: m.Addr, Live: live, Alive: isLive(m), Identity: m.PeerID})
	}
	return voters, members
}

// RejoinRecheck is how often at most a shell's loop asks Rejoin before
// the plan's own wake. A plan's Next is a latest: news — a member the
// transport stopped reaching, such as one restarted under a new identity
// that knows nobody — starts a round at once only if the plan hears of
// it, and waiting for the planned wake (0.5 s while all is well, up to
// 30 s while cut off) delayed a wiped member's rejoin by that much.
// Asking costs a walk over the member list.
const RejoinRecheck = 100 * time.Millisecond

// RejoinCheck is how a shell runs a Rejoin on its loop: the agent's
// rejoin glue and the simulator's core mode both ask it after their
// inputs, and carry out the joins of the plans it returns. Rejoin is per
// agent, not per election (every election shares one membership), and
// counts in wall time, so it sits beside the default election's Node
// rather than inside it; the shell supplies what only it knows (its own
// gossip address, gossip.join, the member snapshot) and performs the
// joins. The zero value is ready once Rejoin is set. It is not safe for
// concurrent use.
type RejoinCheck struct {
	// Rejoin is the policy; the shell sets it before the first Ask.
	Rejoin *Rejoin
	// due is when the last plan asked to be asked again, asked when it
	// was asked.
	due, asked time.Time
	// view is the member slice the last ask filled, reused by the next.
	view []RejoinMember
}

// Due reports whether a plan is due at now: its planned wake has come, or
// RejoinRecheck has passed since the last ask. A shell that gets false
// does nothing more this time round.
func (g *RejoinCheck) Due(now time.Time) bool {
	return !now.Before(g.due) || now.Sub(g.asked) >= RejoinRecheck
}

// Next is when the last plan asked to be asked again (the zero time
// before the first ask): a shell that sleeps between inputs wakes by then.
func (g *RejoinCheck) Next() time.Time { return g.due }

// Ask asks Rejoin for the plan at now, with in's Voters and Members taken
// from n's view at local (the default election's node, on its clock); the
// shell fills in's Self, SelfAddr, Join and Snapshot.
func (g *RejoinCheck) Ask(now time.Time, n *Node, local protocols.Time, in RejoinInput) RejoinPlan {
	g.asked = now
	in.Now = now
	in.Voters, in.Members = n.RejoinViewInto(local, g.view)
	g.view = in.Members
	p := g.Rejoin.Plan(in)
	g.due = p.Next
	return p
}
