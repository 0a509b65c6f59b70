package agent

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/core"
)

// rejoiner is the part of membership.Membership the rejoin glue uses;
// tests that replace gossip have none, and the glue then does nothing.
type rejoiner interface {
	Rejoin(addrs []string)
	SnapshotAddrs() []string
}

// rejoinGlue carries out core.Rejoin's plans: the loop asks it when
// core.RejoinCheck says a plan is due, joins through the addresses it
// names, and puts its problem line in the status. The simulator's core
// mode runs the same core.RejoinCheck.
type rejoinGlue struct {
	check core.RejoinCheck
	// problem is the cut-off line, read by status requests off the loop.
	problem atomic.Pointer[string]
	// last is the status last published, republished with the line when
	// only the line changed.
	last    api.Status
	hasLast bool
}

// checkRejoin runs on the loop after every input: when a plan is due, or
// core.RejoinRecheck has passed since the last, it asks core.Rejoin,
// starts the joins it names, and republishes the status if the cut-off
// line changed.
func (a *Agent) checkRejoin() {
	rj, ok := a.cluster.(rejoiner)
	if !ok {
		return
	}
	now := time.Now()
	g := &a.rejoin
	if !g.check.Due(now) {
		return
	}
	if g.check.Rejoin == nil {
		g.check.Rejoin = core.NewRejoin(core.RejoinConfig{}, rand.New(rand.NewPCG(uint64(now.UnixNano()), uint64(a.self.ID))))
	}
	p := g.check.Ask(now, a.def().core, a.now(), core.RejoinInput{Self: a.cfg.Node.Name, SelfAddr: a.gossipAddr,
		Join: a.cfg.Gossip.Join, Snapshot: rj.SnapshotAddrs()})
	if len(p.Try) > 0 {
		a.log.Debug("rejoining gossip", zap.Strings("addrs", p.Try))
		rj.Rejoin(p.Try)
	}
	if old := g.problem.Load(); (old == nil && p.Problem != "") || (old != nil && *old != p.Problem) {
		if p.Problem != "" {
			a.log.Warn(p.Problem)
		}
		g.problem.Store(&p.Problem)
		if g.hasLast {
			a.hub.Publish(a.withCutOff(g.last))
		}
	}
}

// rejoinWake is how long the loop may sleep before the rejoin plan wants
// to be asked again (its Next); a long time when there is no plan to ask.
func (a *Agent) rejoinWake() time.Duration {
	next := a.rejoin.check.Next()
	if _, ok := a.cluster.(rejoiner); !ok || next.IsZero() {
		return maxSleep
	}
	return time.Until(next)
}

// withCutOff adds the cut-off line, if any, to st's problems.
func (a *Agent) withCutOff(st api.Status) api.Status {
	p := a.rejoin.problem.Load()
	if p == nil || *p == "" {
		return st
	}
	st.Problems = api.NewProblems(append(st.Problems.List(), *p))
	return st
}
