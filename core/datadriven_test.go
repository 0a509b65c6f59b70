package core_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// TestDataDriven replays the interaction scripts in testdata/: several
// core.Node values driven by hand, in the manner of etcd raft's
// interaction tests. A script says when time passes, when a node carries
// out its Ready (through core.Drain, so the output shows the driver
// contract's order as the shell saw it) and when each message arrives.
// `go test ./core -run TestDataDriven -rewrite` regenerates the expected
// output after a deliberate change; read the diff before committing it.
//
// Commands (ids are node ids, 1..n; node i is named ni):
//
//	add-nodes n=3 [protocol=majority|bully|ring] [voters=(1,2,3)]
//	          [observers=(4)] [prevote=false] [ring=lcr|hs|peterson]
//	          [preempt=true]
//	    build n nodes with no members. Majority's voters default to
//	    every node not listed as an observer; with observers the cluster
//	    gossips, which turns on the observers' announcement path.
//	members
//	    every live node applies, as a membership event, each other node's
//	    record: alive while it runs (with the settings digest it
//	    published), dead while crashed. Prints what each node learned.
//	advance DUR
//	    move the shared clock.
//	tick [id=N] [advance=DUR]
//	    move the clock by DUR, then Tick node N (every live node if none).
//	wake id=N
//	    move the clock to N's NextWake and Tick N: its next timer fires.
//	process-ready [id=N]
//	    core.Drain N (every live node with work if none) through the
//	    env's shell, which prints each step as it is asked to do it.
//	deliver [from=N] [to=M] [drop]
//	    step the queued messages and gossip that match into their
//	    destinations, in the order sent; drop discards them instead.
//	stabilize
//	    process-ready and deliver until nothing is left, without time.
//	status [id=N]
//	    each node's core.Node.Status, and when it next needs a Tick.
//	set-health id=N [failing=true] [maint=true]
//	    core.Node.SetHealth: a check failing, maintenance on (either
//	    makes N ineligible), or neither.
//	resign id=N
//	    core.Node.Resign.
//	shutdown id=N
//	    core.Node.Shutdown: N stops; a leader hands over first. status
//	    then shows stop=handover or stop=done (core.Node.Stopping).
//	propose-voters id=N add=NAME | remove=NAME
//	    core.Node.ProposeVoters on N: the token of a change the core
//	    settles later (settle voters …), or its refusal at once.
//	confirm id=N
//	    core.Node.ConfirmLeadership: a consistent read, which times out
//	    after Config.ConfirmTimeout (500ms here).
//	crash id=N / restart id=N
//	    stop N, losing queued messages to it; start it again from its
//	    last persisted HardState and observed epoch, with no members.
//	fail-persist id=N
//	    N's next Persist fails.
//	disk [id=N]
//	    what N persisted.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := &ddEnv{}
		datadriven.RunTest(t, path, env.handle)
	})
}

// Timing of every scripted cluster: round numbers, so the output reads.
const (
	ddStart           = protocols.Time(time.Second) // 0 may read as "never"
	ddElectionTimeout = time.Second
	ddHeartbeat       = 100 * time.Millisecond
	ddConfirmTimeout  = 500 * time.Millisecond
	ddWakeLimit       = 10 * time.Second
)

// ddEnv is the interaction environment: the nodes, one shared clock and
// the network's queue, which moves only when a script says deliver.
type ddEnv struct {
	gossip bool
	// election names the election every node runs ("": the default);
	// old lists the nodes that publish a peer protocol version from
	// before named elections.
	election string
	old      []int
	// sessions: candidacy is held by sessions, which live sessionTTL
	// without a check-in (0: for ever).
	sessions   bool
	sessionTTL time.Duration
	spec       core.ProtocolSpec // the settings every node shares
	now        protocols.Time
	nodes      []*ddNode // nodes[i] has id i+1
	queue      []envelope
	out        strings.Builder
}

// ddNode is one agent: its core while it runs, and what survives a crash.
type ddNode struct {
	id   protocols.ID
	name string
	c    *core.Node // nil while crashed
	// Durable: the last persisted HardState and observed epoch.
	hs       protocols.HardState
	observed uint64
	persists int
	// failPersist: the next Persist fails.
	failPersist bool
	// peers is the transport's peer table (Ready.Peers).
	peers map[protocols.ID]bool
	// Gossip metadata this node publishes (Ready.Digest).
	digest, digestExt string
	// seen is the member record this node last applied for each other.
	seen   map[protocols.ID]membership.Member
	starts uint64
}

// envelope is a message or a gossiped announcement in flight.
type envelope struct {
	from, to protocols.ID
	msg      protocols.Message
	ann      []byte // set for gossip
}

func (e envelope) String() string {
	if e.ann == nil {
		return e.msg.String()
	}
	a, err := observe.Decode(e.ann)
	if err != nil {
		return fmt.Sprintf("%d~>%d gossip (undecodable: %v)", e.from, e.to, err)
	}
	return fmt.Sprintf("%d~>%d gossip %s", e.from, e.to, fmtAnnouncement(a))
}

func (env *ddEnv) handle(t *testing.T, d *datadriven.TestData) string {
	env.out.Reset()
	if d.Cmd != "add-nodes" && env.nodes == nil {
		d.Fatalf(t, "%s before add-nodes", d.Cmd)
	}
	switch d.Cmd {
	case "add-nodes":
		env.addNodes(t, d)
	case "members":
		env.members()
	case "advance":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "advance DUR")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "advance: %v", err)
		}
		env.now = env.now.Add(dur)
		env.printf("now %v\n", env.elapsed())
	case "tick":
		var dur time.Duration
		d.MaybeScanArgs(t, "advance", &dur)
		env.now = env.now.Add(dur)
		for _, n := range env.targets(t, d) {
			n.c.Tick(env.now)
		}
		if dur != 0 {
			env.printf("now %v\n", env.elapsed())
		}
	case "wake":
		n := env.one(t, d)
		if next, _ := n.c.NextWake(env.now, ddWakeLimit); next > env.now {
			env.now = next
		}
		n.c.Tick(env.now)
		env.printf("now %v\n", env.elapsed())
	case "process-ready":
		if d.HasArg("id") {
			env.processReady(env.one(t, d), "")
			break
		}
		for _, n := range env.targets(t, d) {
			if n.c.HasReady() {
				env.printf("> %s ready\n", n.name)
				env.processReady(n, "  ")
			}
		}
	case "deliver":
		env.deliver(t, d)
	case "stabilize":
		env.stabilize()
	case "status":
		for _, n := range env.targets(t, d) {
			env.printf("%s %s", n.name, fmtStatus(n.c.Status(env.now)))
			switch asked, done := n.c.Stopping(); {
			case done:
				env.printf(" stop=done")
			case asked:
				env.printf(" stop=handover")
			}
			if next, _ := n.c.NextWake(env.now, ddWakeLimit); next.Sub(env.now) < ddWakeLimit {
				env.printf(" wake=+%v\n", ms(next.Sub(env.now)))
			} else {
				env.printf(" wake=none\n")
			}
			for _, p := range n.c.Status(env.now).Problems.List() {
				env.printf("  problem: %s\n", p)
			}
		}
	case "set-health":
		n := env.one(t, d)
		var h core.Health
		d.MaybeScanArgs(t, "failing", &h.ChecksFailing)
		d.MaybeScanArgs(t, "maint", &h.Maintenance)
		h.Report = &api.HealthReport{Status: api.HealthPassing}
		switch {
		case h.Maintenance:
			h.Report.Status = api.HealthMaintenance
		case h.ChecksFailing:
			h.Report.Status = api.HealthFailing
		}
		n.c.SetHealth(env.now, h)
	case "resign":
		if err := env.one(t, d).c.Resign(env.now); err != nil {
			env.printf("error: %v\n", err)
		}
	case "shutdown":
		env.one(t, d).c.Shutdown(env.now)
	case "open-session":
		if sid, err := env.one(t, d).c.OpenSession(env.now); err != nil {
			env.printf("error: %v\n", err)
		} else {
			env.printf("session %d\n", sid)
		}
	case "keep-session", "close-session":
		n := env.one(t, d)
		var sid uint64
		d.ScanArgs(t, "session", &sid)
		if d.Cmd == "close-session" {
			n.c.CloseSession(env.now, sid)
		} else if err := n.c.KeepSession(env.now, sid); err != nil {
			env.printf("error: %v\n", err)
		}
	case "propose-voters":
		n := env.one(t, d)
		var c protocols.VoterChange
		d.MaybeScanArgs(t, "add", &c.Add)
		d.MaybeScanArgs(t, "remove", &c.Remove)
		if token, err := n.c.ProposeVoters(env.now, c); err != nil {
			env.printf("error: %v\n", err)
		} else {
			env.printf("token %d\n", token)
		}
	case "confirm":
		n := env.one(t, d)
		token, wait, err := n.c.ConfirmLeadership(env.now)
		switch {
		case err != nil:
			env.printf("error: %v\n", err)
		case !wait:
			env.printf("not leading: answered at once from status (%s)\n", fmtStatus(n.c.Status(env.now)))
		default:
			env.printf("token %d: waiting for a quorum until +%v\n", token, ddConfirmTimeout)
		}
	case "crash":
		env.crash(env.one(t, d))
	case "restart":
		env.restart(t, d)
	case "fail-persist":
		env.one(t, d).failPersist = true
	case "disk":
		for _, n := range env.all(t, d) {
			env.printf("%s %s (%d persists)\n", n.name, fmtDisk(n.hs, n.observed), n.persists)
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if env.out.Len() == 0 {
		return "ok"
	}
	return env.out.String()
}

func (env *ddEnv) printf(format string, args ...any) { fmt.Fprintf(&env.out, format, args...) }

// elapsed is the time since the scripted cluster started, to the
// millisecond: the timers' random draws are exact to the nanosecond, which
// reads badly and says nothing more.
func (env *ddEnv) elapsed() time.Duration { return ms(env.now.Sub(ddStart)) }

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// all is node id=N, or every node.
func (env *ddEnv) all(t *testing.T, d *datadriven.TestData) []*ddNode {
	if !d.HasArg("id") {
		return env.nodes
	}
	var id int
	d.ScanArgs(t, "id", &id)
	if id < 1 || id > len(env.nodes) {
		d.Fatalf(t, "no node %d", id)
	}
	return []*ddNode{env.nodes[id-1]}
}

// targets is node id=N, which must be running, or every running node.
func (env *ddEnv) targets(t *testing.T, d *datadriven.TestData) []*ddNode {
	var out []*ddNode
	for _, n := range env.all(t, d) {
		if n.c != nil {
			out = append(out, n)
		} else if d.HasArg("id") {
			d.Fatalf(t, "%s is crashed", n.name)
		}
	}
	return out
}

// one is node id=N, which must be given and running.
func (env *ddEnv) one(t *testing.T, d *datadriven.TestData) *ddNode {
	if !d.HasArg("id") {
		d.Fatalf(t, "%s needs id=N", d.Cmd)
	}
	return env.targets(t, d)[0]
}

func (env *ddEnv) addNodes(t *testing.T, d *datadriven.TestData) {
	if env.nodes != nil {
		d.Fatalf(t, "add-nodes twice")
	}
	var (
		count     int
		voters    []int
		observers []int
		prevote   = true
		preempt   bool
		ringAlg   string
		protocol  = core.ProtocolMajority
	)
	d.ScanArgs(t, "n", &count)
	d.MaybeScanArgs(t, "protocol", &protocol)
	d.MaybeScanArgs(t, "voters", &voters)
	d.MaybeScanArgs(t, "observers", &observers)
	d.MaybeScanArgs(t, "prevote", &prevote)
	d.MaybeScanArgs(t, "preempt", &preempt)
	d.MaybeScanArgs(t, "ring", &ringAlg)
	d.MaybeScanArgs(t, "session-ttl", &env.sessionTTL)
	env.sessions = d.HasArg("sessions")
	d.MaybeScanArgs(t, "election", &env.election)
	d.MaybeScanArgs(t, "old", &env.old)
	if voters == nil {
		for i := 1; i <= count; i++ {
			if !slices.Contains(observers, i) {
				voters = append(voters, i)
			}
		}
	}
	env.gossip = len(observers) > 0
	env.now = ddStart
	env.spec = core.ProtocolSpec{
		Protocol: protocol, RingAlgorithm: ringAlg,
		ElectionTimeout: ddElectionTimeout, HeartbeatInterval: ddHeartbeat,
		PreVote: prevote, CheckQuorum: true, Preempt: preempt, MaxClockDrift: 0.01,
	}
	for _, v := range voters {
		env.spec.Voters = append(env.spec.Voters, fmt.Sprintf("n%d", v))
	}
	for i := 1; i <= count; i++ {
		n := &ddNode{id: protocols.ID(i), name: fmt.Sprintf("n%d", i)}
		env.nodes = append(env.nodes, n)
		if err := env.start(n); err != nil {
			d.Fatalf(t, "%v", err)
		}
	}
}

// start builds n's core from what it persisted, with no members: they
// arrive as membership events, as from memberlist.
func (env *ddEnv) start(n *ddNode) error {
	n.starts++
	spec := env.spec
	spec.Self = protocols.Member{ID: n.id, Name: n.name}
	spec.HardState = n.hs
	spec.Now = env.now
	spec.Rand = core.NewRand(uint64(n.id), n.starts)
	spec.Candidacy.Ineligible = env.sessions
	c, err := core.New(core.Config{
		Name:     env.election,
		Election: spec,
		Detector: phi.DefaultConfig(),
		Gossip:   env.gossip,
		// Reachable: a running node is reached; the script's network
		// delays messages but does not partition.
		Reachable: func(id protocols.ID) bool {
			i := int(id) - 1
			return i >= 0 && i < len(env.nodes) && env.nodes[i].c != nil
		},
		ObservedEpoch:  n.observed,
		ConfirmTimeout: ddConfirmTimeout,
		Session:        core.SessionPolicy{Required: env.sessions, TTL: env.sessionTTL},
	})
	if err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	n.c = c
	n.peers = make(map[protocols.ID]bool)
	n.seen = make(map[protocols.ID]membership.Member)
	return nil
}

// record is the membership record gossip shows of n.
func (env *ddEnv) record(n *ddNode) membership.Member {
	m := membership.Member{Name: n.name, ID: n.id, State: membership.StateAlive,
		Addr: fmt.Sprintf("10.0.0.%d:7946", n.id), PeerID: fmt.Sprintf("peer-%d", n.id), PeerAddr: fmt.Sprintf("/mem/%d", n.id),
		Digest: n.digest, DigestExt: n.digestExt, Version: core.NamedElectionsVersion}
	if slices.Contains(env.old, int(n.id)) {
		m.Version = core.NamedElectionsVersion - 1
	}
	if n.c == nil {
		m.State = membership.StateDead
	}
	return m
}

func (env *ddEnv) members() {
	for _, n := range env.nodes {
		if n.c == nil {
			continue
		}
		var learned []string
		for _, o := range env.nodes {
			if o == n {
				continue
			}
			m := env.record(o)
			prev, known := n.seen[o.id]
			if known && prev == m || !known && m.State == membership.StateDead {
				continue
			}
			n.seen[o.id] = m
			n.c.ApplyMember(env.now, m)
			if known && prev.State == m.State {
				// Same state, new metadata (a digest published since).
				learned = append(learned, o.name+"=updated")
			} else {
				learned = append(learned, fmt.Sprintf("%s=%s", o.name, m.State))
			}
		}
		if len(learned) > 0 {
			env.printf("%s learns %s\n", n.name, strings.Join(learned, " "))
		}
	}
}

// processReady drains n through the env's shell, each line prefixed.
func (env *ddEnv) processReady(n *ddNode, prefix string) {
	if !n.c.HasReady() {
		env.printf("%sno ready\n", prefix)
		return
	}
	if err := core.Drain(n.c, ddShell{env: env, n: n, prefix: prefix}); err != nil {
		env.printf("%serror: %v\n", prefix, err)
	}
}

func (env *ddEnv) deliver(t *testing.T, d *datadriven.TestData) {
	var from, to protocols.ID
	d.MaybeScanArgs(t, "from", &from)
	d.MaybeScanArgs(t, "to", &to)
	drop := d.HasArg("drop")
	var kept, picked []envelope
	for _, e := range env.queue {
		if (from == 0 || e.from == from) && (to == 0 || e.to == to) {
			picked = append(picked, e)
		} else {
			kept = append(kept, e)
		}
	}
	env.queue = kept
	if len(picked) == 0 {
		env.printf("no messages\n")
	}
	for _, e := range picked {
		if drop {
			env.printf("dropped: %s\n", e)
			continue
		}
		env.step(e, "")
	}
}

// step hands e to its destination.
func (env *ddEnv) step(e envelope, prefix string) {
	dst := env.nodes[e.to-1]
	if dst.c == nil {
		env.printf("%slost: %s (%s is down)\n", prefix, e, dst.name)
		return
	}
	env.printf("%s%s\n", prefix, e)
	var err error
	if e.ann != nil {
		err = dst.c.Gossiped(env.now, e.ann)
	} else {
		err = dst.c.Step(env.now, e.msg)
	}
	if err != nil {
		env.printf("%s  error: %v\n", prefix, err)
	}
}

// maxStabilizeRounds bounds stabilize: a cluster that keeps talking with
// the clock stopped is a bug worth a failed test, not a hang.
const maxStabilizeRounds = 50

func (env *ddEnv) stabilize() {
	for range maxStabilizeRounds {
		busy := false
		for _, n := range env.nodes {
			if n.c != nil && n.c.HasReady() {
				busy = true
				env.printf("> %s ready\n", n.name)
				env.processReady(n, "  ")
			}
		}
		for _, n := range env.nodes {
			var mine, rest []envelope
			for _, e := range env.queue {
				if e.to == n.id {
					mine = append(mine, e)
				} else {
					rest = append(rest, e)
				}
			}
			if len(mine) == 0 {
				continue
			}
			busy = true
			env.queue = rest
			env.printf("> %s receives\n", n.name)
			for _, e := range mine {
				env.step(e, "  ")
			}
		}
		if !busy {
			return
		}
	}
	env.printf("still busy after %d rounds\n", maxStabilizeRounds)
}

func (env *ddEnv) crash(n *ddNode) {
	n.c = nil
	lost := 0
	kept := env.queue[:0]
	for _, e := range env.queue {
		if e.to == n.id {
			lost++
		} else {
			kept = append(kept, e)
		}
	}
	env.queue = kept
	env.printf("%s crashed; %d queued to it lost\n", n.name, lost)
}

func (env *ddEnv) restart(t *testing.T, d *datadriven.TestData) {
	nodes := env.all(t, d)
	if len(nodes) != 1 || nodes[0].c != nil {
		d.Fatalf(t, "restart id=N of a crashed node")
	}
	n := nodes[0]
	if err := env.start(n); err != nil {
		d.Fatalf(t, "%v", err)
	}
	env.printf("%s restarted from %s\n", n.name, fmtDisk(n.hs, n.observed))
}

// ddShell is the env as core.Drain's shell for one node: it prints each
// step as Drain asks for it, so a script shows the contract's order.
type ddShell struct {
	env    *ddEnv
	n      *ddNode
	prefix string
}

var _ core.Shell = ddShell{}

// errInjected is the failure fail-persist plants.
var errInjected = errors.New("injected by fail-persist")

func (s ddShell) printf(format string, args ...any) {
	s.env.printf(s.prefix+format+"\n", args...)
}

func (s ddShell) Persist(hs *protocols.HardState, observed uint64) error {
	line := "persist"
	if hs != nil {
		line += " " + fmtHardState(*hs)
	}
	if observed != 0 {
		line += fmt.Sprintf(" observed=%d", observed)
	}
	if s.n.failPersist {
		s.n.failPersist = false
		s.printf("%s: FAILED", line)
		return errInjected
	}
	s.printf("%s", line)
	if hs != nil {
		s.n.hs = *hs
	}
	if observed != 0 {
		s.n.observed = observed
	}
	s.n.persists++
	return nil
}

// Send queues what the transport can send: a message to an id the peer
// table lacks is dropped, as transport.Host.Send drops it.
func (s ddShell) Send(msgs []protocols.Message) {
	for _, m := range msgs {
		if !s.n.peers[m.To] {
			s.printf("send %s: no peer, dropped", m)
			continue
		}
		s.printf("send %s", m)
		s.env.queue = append(s.env.queue, envelope{from: m.From, to: m.To, msg: m})
	}
}

func (s ddShell) ApplyPeers(peers []core.PeerChange) {
	parts := make([]string, 0, len(peers))
	for _, p := range peers {
		sign := "+"
		if p.Remove {
			sign = "-"
			delete(s.n.peers, p.ID)
		} else {
			s.n.peers[p.ID] = true
		}
		part := sign + p.Name
		if !p.Remove && !p.Probe {
			part += "(no-probe)"
		}
		parts = append(parts, part)
	}
	s.printf("peers %s", strings.Join(parts, " "))
}

// Gossip spreads each announcement to every other node, in id order.
func (s ddShell) Gossip(anns []observe.Announcement) {
	for _, a := range anns {
		s.printf("gossip %s", fmtAnnouncement(a))
		for _, o := range s.env.nodes {
			if o != s.n {
				s.env.queue = append(s.env.queue, envelope{from: s.n.id, to: o.id, ann: a.Append(nil)})
			}
		}
	}
}

func (s ddShell) PublishDigest(digest, ext string) {
	s.n.digest, s.n.digestExt = digest, ext
	s.printf("digest %s ext=%q", digest, ext)
}

func (s ddShell) Publish(st api.Status) { s.printf("status %s", fmtStatus(st)) }

// FireHooks prints only which hooks fire: the role, leader and epoch
// they are told are the status line's, printed just before.
func (s ddShell) FireHooks(tr core.Transition) { s.printf("hooks on=%s", tr.On) }

func (s ddShell) Settle(cs []core.Confirmation, vs []core.VoterResult, ends []core.SessionEnd) {
	for _, e := range ends {
		s.printf("session %d ended (expired=%v)", e.ID, e.Expired)
	}
	for _, c := range cs {
		if c.Err != nil {
			s.printf("settle read %d: %v", c.Token, c.Err)
		} else {
			s.printf("settle read %d: confirmed", c.Token)
		}
	}
	for _, v := range vs {
		if v.Err != nil {
			s.printf("settle voters %d: %v", v.Token, v.Err)
		} else {
			s.printf("settle voters %d: committed %+v", v.Token, v.Voters)
		}
	}
}

func fmtHardState(hs protocols.HardState) string {
	s := fmt.Sprintf("term=%d vote=%d epoch=%d", hs.Term, hs.Vote, hs.Epoch)
	if !hs.Config.IsZero() {
		s += " cfg=" + hs.Config.String()
		if hs.ConfigCommitted {
			s += " committed"
		}
	}
	return s
}

func fmtDisk(hs protocols.HardState, observed uint64) string {
	return fmt.Sprintf("%s observed=%d", fmtHardState(hs), observed)
}

func fmtAnnouncement(a observe.Announcement) string {
	prefix := ""
	if a.Election != "" {
		prefix = a.Election + ": "
	}
	return fmt.Sprintf(prefix+"leader=%d epoch=%d term=%d seq=%d age=%v", a.Leader, a.Epoch, a.Term, a.Seq, a.Age)
}

// fmtStatus is the status on one line: what a watcher of the socket
// would act on.
func fmtStatus(st api.Status) string {
	leader := st.Leader
	if leader == "" {
		leader = "none"
	}
	s := fmt.Sprintf("%s leader=%s epoch=%d", st.Role, leader, st.Epoch)
	health := "unhealthy"
	if st.Quorum.Healthy {
		health = "healthy"
	}
	s += fmt.Sprintf(" quorum=%d/%d %s members=%d", st.Quorum.Reachable, st.Quorum.Voters, health, st.Members)
	if st.LeaseMS > 0 {
		s += fmt.Sprintf(" lease=%dms", st.LeaseMS)
	}
	if st.LeaderAgeMS > 0 {
		s += fmt.Sprintf(" learned-age=%dms", st.LeaderAgeMS)
	}
	if st.Health != nil {
		s += " health=" + st.Health.Status
		if st.Health.NoHealthyCandidate {
			s += " no-healthy-candidate"
		}
	}
	return s + fmt.Sprintf(" seq=%d", st.Seq)
}
