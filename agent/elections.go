package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/core"
	"github.com/conclave-agent/conclave/health"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
)

// Named elections (docs/elections.md): the agent runs one core.Node per
// election over its one membership, transport and socket. This file holds
// each election's I/O state (its store, its waiting requests, its status
// snapshot) and the routing of inputs to it; every decision is its core's.

// electionsDir holds the named elections' state under node.data_dir, one
// directory each; the default election's stays at the top, where every
// release before named elections kept it, so an upgraded agent starts
// from it unchanged.
const electionsDir = "elections"

// election is one election this agent runs.
type election struct {
	name  string
	core  *core.Node
	store *store.Store
	// snapshot is the loop's latest status, read by socket requests
	// without a trip through the loop.
	snapshot atomic.Pointer[core.Snapshot]

	// Loop-owned.
	confirms   map[uint64][]chan error          // consistent reads by token
	voterWaits map[uint64]chan core.VoterResult // voter changes by token
	// maint is this named election's own maintenance record in force,
	// nil when none (the agent-wide one is healthGlue.maint).
	maint *health.Maint
	// touched: an input reached this election's core since its last
	// Drain and snapshot (loop-owned). Elections no input reached have
	// no Ready pending and no new status, and are skipped: with many
	// elections, most are idle at any moment.
	touched bool
	// snapAt is when the snapshot's view (members, quorum, problems)
	// was last computed in full; snapDue asks for a full one at the next
	// storeSnapshots, snapOwed for one once snapshotEvery has passed
	// (loop-owned).
	snapAt            protocols.Time
	snapDue, snapOwed bool
	// wake is the core's NextWake as last computed, wakeOK its ok;
	// wakeStale says an input reached the core since (loop-owned).
	wake              protocols.Time
	wakeOK, wakeStale bool
	// anchor is the anchor election of the fate-sharing group this one
	// follows, nil for none (config.Config.GroupAnchor).
	anchor *election
	// sessions are the local processes' sessions the core holds open
	// (core/session.go), by id: each channel hears once when the core
	// ends its session.
	sessions map[uint64]chan core.SessionEnd
	// sessionSalt makes this process's session ids its own
	// (election.sessionID); drawn at the first session. Loop-owned.
	sessionSalt string
	// probes is what this election asked of the transport's probing
	// (core.PeerChange.Probe) by member: a member is probed while any
	// election asks for it.
	probes map[protocols.ID]bool
}

// electionDir is the directory of the election called name's state.
func electionDir(dataDir, name string) string {
	if name == config.DefaultElection {
		return dataDir
	}
	return filepath.Join(dataDir, electionsDir, name)
}

// openElection opens the store of the election called name and reads its
// persisted state.
func openElection(dataDir, name string) (*election, protocols.HardState, uint64, error) {
	dir := electionDir(dataDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, protocols.HardState{}, 0, fmt.Errorf("election %s: create its state directory: %w", name, err)
	}
	st, err := store.Open(dir)
	if err != nil {
		return nil, protocols.HardState{}, 0, fmt.Errorf("election %s: %w", name, err)
	}
	hs, err := st.Load()
	if err != nil {
		return nil, protocols.HardState{}, 0, fmt.Errorf("election %s: %w", name, err)
	}
	observed, err := st.LoadObserved()
	if err != nil {
		return nil, protocols.HardState{}, 0, fmt.Errorf("election %s: %w", name, err)
	}
	e := &election{
		name:       name,
		store:      st,
		confirms:   make(map[uint64][]chan error),
		voterWaits: make(map[uint64]chan core.VoterResult),
		probes:     make(map[protocols.ID]bool),
		sessions:   make(map[uint64]chan core.SessionEnd),
		touched:    true, // its first status is yet to be published
	}
	return e, hs, observed, nil
}

// def is the default election, which every agent runs.
func (a *Agent) def() *election { return a.elections[0] }

// electionNamed returns the election called name, nil if this agent runs
// none.
func (a *Agent) electionNamed(name string) *election {
	for _, e := range a.elections {
		if e.name == name {
			return e
		}
	}
	return nil
}

// electionOf returns the election a socket request names
// (localapi.ElectionFrom), or an error that says how to list them.
func (a *Agent) electionOf(ctx context.Context) (*election, error) {
	name := localapi.ElectionFrom(ctx)
	if e := a.electionNamed(name); e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("%w: this agent runs no election %q", localapi.ErrNoElection, name)
}

var _ localapi.ElectionsBackend = backend{}

// Elections implements localapi.ElectionsBackend: every election's
// status, the default one first, from the loop's latest snapshots.
func (b backend) Elections(ctx context.Context) ([]api.Election, error) {
	a := b.a
	out := make([]api.Election, 0, len(a.elections))
	for _, e := range a.elections {
		st, ok := a.loadSnapshot(e)
		if !ok {
			if err := a.do(ctx, func() { st = e.core.Status(a.now()) }); err != nil {
				return nil, err
			}
		}
		st.Election = e.name
		st.Problems = a.withKeyProblems(st.Problems)
		out = append(out, api.Election{Status: st})
	}
	return out, nil
}

// receiveFor returns the election a peer's message belongs to, and false
// when this agent runs none by its name.
func (a *Agent) receiveFor(m protocols.Message) (*election, bool) {
	name := m.Election
	if name == "" {
		name = config.DefaultElection
	}
	e := a.electionNamed(name)
	return e, e != nil
}

// probed reports whether any election wants member id probed.
func (a *Agent) probed(id protocols.ID) bool {
	for _, e := range a.elections {
		if e.probes[id] {
			return true
		}
	}
	return false
}

// sendAll hands the transport every message of one loop iteration at
// once, so that it coalesces those to one peer into one frame.
func (a *Agent) sendAll(msgs []protocols.Message) { a.tr.SendAll(msgs) }

// publishNamed publishes a named election's status to its watchers.
func (a *Agent) publishNamed(e *election, st api.Status) {
	a.hub.PublishTo(e.name, a.withCutOff(st))
}

// storeSnapshots publishes every touched election's current status for
// loadSnapshot. It runs on the loop after every input, the same moments
// the status could change. With many elections a leader's heartbeat
// answers touch each of them several times per heartbeat interval, and
// the view (members, quorum, problems) was most of an idle leader's cost
// while nothing in it moved: between full snapshots at most
// snapshotEvery apart, a touch freshens the lease and the leader's age
// alone (core.Node.Freshen). A change of role, leader or epoch (Publish),
// and every input that may change the view (touchAll: membership,
// requests, health), take a full one at once.
func (a *Agent) storeSnapshots() {
	now := a.now()
	every := a.snapshotEvery()
	for _, e := range a.elections {
		if !e.touched {
			continue
		}
		e.touched, e.wakeStale = false, true
		prev := e.snapshot.Load()
		if !e.snapDue && prev != nil && now.Sub(e.snapAt) < every {
			if snap, ok := e.core.Freshen(now, *prev); ok {
				e.snapshot.Store(&snap)
				e.snapOwed = true
				continue
			}
		}
		snap := e.core.Snapshot(now)
		e.snapshot.Store(&snap)
		e.snapAt, e.snapDue, e.snapOwed = now, false, false
	}
}

// snapshotEvery bounds how stale a snapshot's view (members, quorum,
// problems) may be between the inputs that refresh it at once: four
// heartbeat intervals (200 ms at the defaults) while inputs arrive, one
// more once they stop (owedSnapshots). A follower of 50
// elections is touched once per election per interval; at one interval
// every touch took a full snapshot, a tenth of its CPU.
func (a *Agent) snapshotEvery() time.Duration {
	return 4 * a.cfg.Detector.HeartbeatInterval.Std()
}

// owedSnapshots returns the earliest time an election's full snapshot
// is owed (ok false: none); with touch, it touches the elections whose
// owed snapshot is due at now, so the loop takes it.
//
// An owed snapshot falls due one heartbeat interval after snapshotEvery
// has passed. While heartbeats flow, the first input after
// snapshotEvery takes the full snapshot (storeSnapshots) and clears the
// debt, so the loop needs no wake of its own for it; due at
// snapshotEvery itself, the owed wake raced the heartbeat due at the
// same moment and won about half the time, several wakes a second on
// every voter. The wake is for when inputs stop.
func (a *Agent) owedSnapshots(now protocols.Time, touch bool) (next protocols.Time, ok bool) {
	every := a.snapshotEvery() + a.cfg.Detector.HeartbeatInterval.Std()
	for _, e := range a.elections {
		if !e.snapOwed {
			continue
		}
		at := e.snapAt.Add(every)
		if touch && at <= now {
			e.touched, e.snapDue = true, true
			continue
		}
		if !ok || at < next {
			next, ok = at, true
		}
	}
	return next, ok
}

// touchAll marks every election as reached by an input (membership, a
// socket request, health, a stop), so that the next handleReady drains
// and snapshots them all.
func (a *Agent) touchAll() {
	for _, e := range a.elections {
		e.touched, e.snapDue = true, true
	}
}

// settleConfirm answers the consistent reads waiting on a quorum round.
func (e *election) settleConfirm(c core.Confirmation) {
	var err error
	if c.Err != nil {
		err = fmt.Errorf("%w: %v", localapi.ErrUnavailable, c.Err)
	}
	for _, done := range e.confirms[c.Token] {
		done <- err
	}
	delete(e.confirms, c.Token)
}

// settleVoters answers the voter changes the core settled.
func (e *election) settleVoters(res core.VoterResult) {
	if done, ok := e.voterWaits[res.Token]; ok {
		done <- res
		delete(e.voterWaits, res.Token)
	}
}

// endSession tells the holder of a session the core ended (a missed
// check-in) that it is over.
func (e *election) endSession(end core.SessionEnd) {
	if ch, ok := e.sessions[end.ID]; ok {
		ch <- end
		delete(e.sessions, end.ID)
	}
}

// followGroups tells each election that follows a fate-sharing group
// whether this agent leads the group's anchor now; the core decides what
// follows (core/group.go). Before every Ready, so that a follower hands
// over in the same iteration as the anchor's leadership moves.
func (a *Agent) followGroups() {
	now := a.now()
	for _, e := range a.elections {
		if e.anchor != nil && e.core.SetGroupLead(now, e.anchor.core.Leads(now)) {
			e.touched = true
		}
	}
}
