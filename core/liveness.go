package core

import (
	"fmt"

	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// Liveness is an agent's node-level failure detection: one phi detector
// per peer, shared by every election the agent runs, as Consul's
// sessions, etcd's leases and ZooKeeper's sessions share one liveness per
// node. A peer that heartbeats this agent in any election is alive in all
// of them, and a peer that dies is suspected by every election watching
// it at the same moment, from one computation.
//
// What each election watches stays the election's own (core/detect.go):
// a follower watches its leader, a majority leader its voters. A peer's
// detector lives while at least one election watches it, so its history
// is never held against it once nobody expects it to heartbeat. Its
// heartbeat statistics (core/arrivals.go) live as long as the peer's id.
//
// Heartbeats of several elections from one peer arrive together: the
// peer's timers are served together within the timer slack (WakeSlack,
// a tenth of the heartbeat interval) and the transport carries one frame
// per peer per loop iteration. Arrivals closer than that slack to the last
// one counted are one beat: the detector models the peer's heartbeat
// rhythm, not how many elections it runs. The slack is far below the
// jitter that could bring two real beats that close. A Liveness is not safe for concurrent use: the agent drives every
// election from one loop, and the simulator from one thread. It must
// never read a clock: time comes with every call.
type Liveness struct {
	cfg   phi.Config
	peers map[protocols.ID]*peerLiveness
	// stats holds each peer's heartbeat inter-arrival histogram
	// (core/arrivals.go), kept while its id exists.
	stats map[protocols.ID]*arrivals
}

// peerLiveness is one peer's shared detector and who watches it.
type peerLiveness struct {
	d *phi.Detector
	// watchers counts the elections watching the peer.
	watchers int
	// suspectAt and suspectOK cache d.SuspectAt until the next beat,
	// while suspectSeen is set.
	suspectAt   protocols.Time
	suspectOK   bool
	suspectSeen bool
}

// NewLiveness returns an agent's shared detectors, each configured by cfg.
func NewLiveness(cfg phi.Config) (*Liveness, error) {
	if _, err := phi.New(cfg); err != nil {
		return nil, fmt.Errorf("core: failure detector: %w", err)
	}
	return &Liveness{
		cfg:   cfg,
		peers: make(map[protocols.ID]*peerLiveness),
		stats: make(map[protocols.ID]*arrivals),
	}, nil
}

// Config is the detectors' configuration.
func (l *Liveness) Config() phi.Config { return l.cfg }

// watch adds one watcher of id, making its detector if none exists; a
// new detector starts its clock at now when start is set (a leader
// learned from an announcement is watched as if it had just heartbeated).
func (l *Liveness) watch(now protocols.Time, id protocols.ID, start bool) {
	p := l.peers[id]
	if p == nil {
		d, err := phi.New(l.cfg)
		if err != nil {
			panic("core: detector config validated in NewLiveness: " + err.Error())
		}
		p = &peerLiveness{d: d}
		l.peers[id] = p
		if start {
			d.Heartbeat(now)
		}
	}
	p.watchers++
}

// unwatch removes one watcher of id; the last one drops its detector.
func (l *Liveness) unwatch(id protocols.ID) {
	p := l.peers[id]
	if p == nil {
		return
	}
	if p.watchers--; p.watchers <= 0 {
		delete(l.peers, id)
	}
}

// beat records a heartbeat from a watched peer at now, unless it is part
// of the beat counted last (closer than the timer slack).
func (l *Liveness) beat(now protocols.Time, id protocols.ID) {
	p := l.peers[id]
	if p == nil {
		return
	}
	last, heard := p.d.Last()
	if heard && now.Sub(last) < WakeSlack(l.cfg.FirstHeartbeatEstimate) {
		return
	}
	if heard {
		a := l.stats[id]
		if a == nil {
			a = new(arrivals)
			l.stats[id] = a
		}
		a.add(now.Sub(last))
	}
	p.d.Heartbeat(now)
	p.suspectSeen = false
}

// suspects reports whether id's detector has crossed the threshold.
func (l *Liveness) suspects(now protocols.Time, id protocols.ID) bool {
	p := l.peers[id]
	return p != nil && p.d.Suspect(now)
}

// phiOf is id's current phi, and whether a detector watches it.
func (l *Liveness) phiOf(now protocols.Time, id protocols.ID) (float64, bool) {
	p := l.peers[id]
	if p == nil {
		return 0, false
	}
	return p.d.Phi(now), true
}

// suspectAtOf is when id's detector will suspect it if no beat arrives,
// computed once per beat for every election watching it.
func (l *Liveness) suspectAtOf(id protocols.ID) (protocols.Time, bool) {
	p := l.peers[id]
	if p == nil {
		return 0, false
	}
	if !p.suspectSeen {
		p.suspectAt, p.suspectOK = p.d.SuspectAt()
		p.suspectSeen = true
	}
	return p.suspectAt, p.suspectOK
}

// forget drops what was learned about an id that no longer exists.
func (l *Liveness) forget(id protocols.ID) {
	delete(l.stats, id)
}
