package majority

import (
	"fmt"

	"github.com/conclave-agent/conclave/protocols"
)

// contextBootstrap is set in the Context of (pre-)vote requests sent at
// configuration index 0, with the round number in the low bits; responses
// echo it so that the bootstrap check counts only this round's answers.
const contextBootstrap = 1 << 63

// bootConfig chooses the configuration a node starts with: the persisted
// one; else, for a fresh node, the configured list at index 0 (not yet
// replicated); else — state written before configurations were replicated,
// so a cluster already formed — the configured list at index 1, which ranks
// above every bootstrap list and lets differing lists be caught as
// conflicts.
func bootConfig(cfg Config) (protocols.Configuration, error) {
	switch {
	case !cfg.HardState.Config.IsZero():
		return cfg.HardState.Config, nil
	case cfg.HardState.IsZero():
		return protocols.NewConfiguration(0, 0, cfg.Voters)
	default:
		return protocols.NewConfiguration(0, 1, cfg.Voters)
	}
}

// newBootRound starts a round of the bootstrap check when the
// configuration is at index 0, and returns its Context (0 otherwise).
func (n *Node) newBootRound() uint64 {
	clear(n.replied)
	if n.conf.Index != 0 {
		n.bootCtx = 0
		return 0
	}
	n.bootCtx = contextBootstrap | (n.bootCtx+1)&^contextBootstrap
	return n.bootCtx
}

// bootstrapClear reports whether, at index 0, every known member that
// gossip does not report dead answered this round (see docs/voters.md: a
// bootstrap list must not win while a member that may hold a conflicting
// one is silent).
func (n *Node) bootstrapClear() bool {
	if n.conf.Index != 0 {
		return true
	}
	for id := range n.members {
		if id != n.id && !n.replied[id] && !n.down[id] {
			return false
		}
	}
	return true
}

// outranks reports whether configuration a must win over b: a newer
// version, or at the same version a different list that ranks above
// (longer, then lexicographically larger).
func outranks(a, b protocols.Configuration) bool {
	if c := a.Compare(b); c != 0 {
		return c > 0
	}
	if a.Voters == b.Voters {
		return false
	}
	if la, lb := a.Len(), b.Len(); la != lb {
		return la > lb
	}
	return a.Voters > b.Voters
}

// noteBootstrapReply counts m, a response, towards the bootstrap check; it
// stands the candidate down when m carries a configuration that outranks
// its own, and reports whether it did.
func (n *Node) noteBootstrapReply(now protocols.Time, m protocols.Message) bool {
	if n.bootCtx == 0 || m.Context != n.bootCtx || n.conf.Index != 0 ||
		(n.state != statePreCandidate && n.state != stateCandidate) ||
		(m.Kind != protocols.MsgPreVoteResp && m.Kind != protocols.MsgVoteResp) {
		return false
	}
	n.replied[m.From] = true
	if mc := m.Config(); mc.Voters != "" && (mc.Voters != n.conf.Voters || mc.Compare(n.conf) != 0) {
		if mc.Compare(n.conf) == 0 {
			n.problem(fmt.Sprintf("%s has voters [%s] where this node has [%s], both at index %d", n.name(m.From), mc.Voters, n.conf.Voters, mc.Index))
		}
		if outranks(mc, n.conf) {
			n.log.Infow("standing down: a member holds a configuration that outranks ours", "member", n.name(m.From), "theirs", mc.String(), "ours", n.conf.String())
			n.becomeFollower(now, n.term, protocols.None)
			return true
		}
	}
	if m.Term < n.term {
		// Step drops answers of an older term before the tally, but this
		// one may be the last the check waited for.
		n.tally(now, n.state)
		return true
	}
	return false
}
