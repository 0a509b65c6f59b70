package membership

import (
	"go.uber.org/zap"
)

// Rejoin joins through addrs in the background, up to joinParallel at a
// time, and returns at once. It does nothing while an earlier Rejoin is
// still joining, or after Shutdown: the caller paces the rounds
// (core.Rejoin) and asks again. A node that joined a cluster through a
// single seed that died, or restarted with no member snapshot, finds the
// others this way (docs/multihost.md).
func (m *Membership) Rejoin(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	m.rejoinMu.Lock()
	defer m.rejoinMu.Unlock()
	if m.rejoinsClosed || !m.rejoining.CompareAndSwap(false, true) {
		return
	}
	addrs = append([]string(nil), addrs...)
	m.joinDone.Add(1)
	go func() {
		defer m.joinDone.Done()
		defer m.rejoining.Store(false)
		reached, still, err := m.joinEach(addrs)
		if reached > 0 {
			m.log.Info("rejoined through known addresses", zap.Int("reached", reached), zap.Strings("unreached", still))
			return
		}
		m.log.Debug("rejoin: no address answered", zap.Strings("addrs", addrs), zap.Error(err))
	}()
}

// SnapshotAddrs returns the gossip addresses of the member snapshot this
// node started with (nil without one): core.Rejoin tries them while this
// node is cut off, after the join loop has dropped them.
func (m *Membership) SnapshotAddrs() []string {
	return append([]string(nil), m.snapshotAddrs...)
}
