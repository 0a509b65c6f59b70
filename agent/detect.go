package agent

import (
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/phi"
	"github.com/conclave-agent/conclave/protocols"
)

// detectorConfig maps the [detector] section onto phi's parameters.
func (a *Agent) detectorConfig() phi.Config {
	d := a.cfg.Detector
	return phi.Config{
		Threshold:              d.Threshold,
		MaxSamples:             d.MaxSamples,
		MinStdDev:              d.MinStdDev.Std(),
		AcceptablePause:        d.AcceptablePause.Std(),
		FirstHeartbeatEstimate: d.HeartbeatInterval.Std(),
	}
}

// heard records a heartbeat (or a heartbeat's answer) from id: followers
// watch the leader this way, and a leader watches its followers. A member
// suspected before is cleared at once.
func (a *Agent) heard(now protocols.Time, id protocols.ID) {
	d := a.detectors[id]
	if d == nil {
		var err error
		if d, err = phi.New(a.detectorConfig()); err != nil {
			// config.Validate checked these values; this is a bug.
			a.log.Error("failure detector", zap.Error(err))
			return
		}
		a.detectors[id] = d
	}
	d.Heartbeat(now)
	delete(a.suspectAt, id)
	if a.suspected[id] {
		delete(a.suspected, id)
		a.log.Info("member heard again", zap.String("member", a.byID[id]))
		a.proto.Suspect(now, id, false)
	}
}

// watchLeader starts watching a newly learned leader as if it had just
// heartbeated: a follower may learn the leader from an announcement
// (ring's LEADER round, bully's COORDINATOR) before its first heartbeat, and
// a leader that dies in between must still become suspected, or ring and
// bully keep routing elections to it until gossip declares it dead.
func (a *Agent) watchLeader(now protocols.Time, leader protocols.ID) {
	if leader == a.self.ID || leader == protocols.None || a.detectors[leader] != nil {
		return
	}
	d, err := phi.New(a.detectorConfig())
	if err != nil {
		a.log.Error("failure detector", zap.Error(err))
		return
	}
	d.Heartbeat(now)
	a.detectors[leader] = d
	delete(a.suspectAt, leader)
}

// checkDetectors raises a suspicion, once, for every member whose phi
// crossed the threshold.
func (a *Agent) checkDetectors(now protocols.Time) {
	for id, d := range a.detectors {
		if a.suspected[id] || !d.Suspect(now) {
			continue
		}
		a.suspected[id] = true
		a.log.Info("member suspected", zap.String("member", a.byID[id]), zap.Float64("phi", d.Phi(now)))
		a.proto.Suspect(now, id, true)
	}
}

// nextWake is how long the loop may sleep before something is due: the
// protocol's next timer, the moment a watched member's phi would cross the
// threshold, or a consistent read's deadline. A protocol that cannot name
// its timers is ticked every tickInterval.
func (a *Agent) nextWake(now protocols.Time) time.Duration {
	limit := maxSleep
	next := now.Add(limit)
	if dl, ok := a.proto.(protocols.Deadliner); ok {
		if t, armed := dl.NextDeadline(now); armed && t < next {
			next = t
		}
	} else {
		next = now.Add(tickInterval)
	}
	for id, d := range a.detectors {
		if a.suspected[id] {
			continue
		}
		t, ok := a.suspectAt[id]
		if !ok {
			// Cached per heartbeat: SuspectAt costs ~64 evaluations of phi.
			if t, ok = d.SuspectAt(); !ok {
				continue
			}
			a.suspectAt[id] = t
		}
		if t < next {
			next = t
		}
	}
	if t, ok := a.announceDeadline(); ok && t < next {
		next = t
	}
	for _, w := range a.confirms {
		if w.deadline < next {
			next = w.deadline
		}
	}
	return max(next.Sub(now), minSleep)
}

// phiOf returns the current phi of a member, and whether it is measured.
func (a *Agent) phiOf(now protocols.Time, id protocols.ID) (float64, bool) {
	d := a.detectors[id]
	if d == nil {
		return 0, false
	}
	return d.Phi(now), true
}

// forgetDetectors drops what the detectors learned about members that no
// longer heartbeat us after a leadership change: a follower hears only the
// leader, so a former leader falls silent without having failed, and must
// not stay suspected (ring would skip it). When this node leads in
// majority, it keeps watching every follower through their heartbeat
// answers; bully and ring followers do not answer heartbeats, so a leader
// there forgets everything: a suspicion it kept could never clear, and a
// ring leader that skips a member that came back (restarted before gossip
// declared it dead) swallows that member's elections for ever. While no
// leader is known it forgets nothing: the leader that was just lost may be
// dead, and its detector is what lets ring and bully route around it
// before gossip declares it dead seconds later.
func (a *Agent) forgetDetectors(now protocols.Time, leader protocols.ID) {
	if leader == protocols.None || (leader == a.self.ID && a.cfg.Election.Protocol == config.ProtocolMajority) {
		return
	}
	for id := range a.detectors {
		if id == leader && leader != a.self.ID {
			continue
		}
		delete(a.detectors, id)
		if a.suspected[id] {
			delete(a.suspected, id)
			a.proto.Suspect(now, id, false)
		}
	}
}

// forgetDetector drops the detector of a member that is down or gone, and
// clears a suspicion the protocol holds for it.
func (a *Agent) forgetDetector(now protocols.Time, id protocols.ID) {
	delete(a.detectors, id)
	delete(a.suspectAt, id)
	if a.suspected[id] {
		delete(a.suspected, id)
		a.proto.Suspect(now, id, false)
	}
}
