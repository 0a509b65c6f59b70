package membership

import (
	"encoding/binary"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/internal/errtext"
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

// A restarted agent with a wiped data directory and no gossip.join knows
// nobody, yet the others may still list it alive: it came back on the
// same address before they declared it dead, so their probes reach it,
// nobody is short, and nobody joins it. Only memberlist's periodic
// push-pull (30 s at LAN) would tell it of the others. So every ack this
// node sends to a probe says how many live members it knows (AckPayload),
// and a node whose probe is answered by a member that knows only itself
// joins it at once (NotifyPingComplete): the join's push-pull hands it
// the whole list. Memberlist probes one member every probe interval, so
// the lonely one is found within about one interval.

// ackMagic opens this node's ack payload: an ack without it (an older
// agent) says nothing.
const ackMagic = 0xc1

// lonelyJoinEvery paces joins through one lonely member: one in flight,
// and at most one per interval, so a member that stays alone (its
// gossip port answers, its joins fail) costs one TCP connection per
// interval to each prober at most.
const lonelyJoinEvery = 2 * time.Second

// ackPayload encodes the number of live members this node knows,
// itself included. It counts its own table, not memberlist's: memberlist
// answers probes before Start has its handle.
func (m *Membership) ackPayload() []byte {
	return binary.AppendUvarint([]byte{ackMagic}, uint64(m.liveCount()))
}

// knownInAck decodes an ack payload: the live members its sender knows,
// ok false for a payload this version does not write.
func knownInAck(p []byte) (uint64, bool) {
	if len(p) < 2 || p[0] != ackMagic {
		return 0, false
	}
	n, k := binary.Uvarint(p[1:])
	if k <= 0 {
		return 0, false
	}
	return n, true
}

// lonelyAnswer acts on a probe of n answered with payload: when n knows
// only itself and this node knows others, join it in the background,
// paced by lonelyJoinEvery.
func (m *Membership) lonelyAnswer(n *memberlist.Node, payload []byte) {
	known, ok := knownInAck(payload)
	if !ok || known > 1 || m.liveCount() < 2 {
		return
	}
	addr := n.Address()
	now := time.Now()
	m.rejoinMu.Lock()
	defer m.rejoinMu.Unlock()
	if m.rejoinsClosed || now.Before(m.lonelyNext[n.Name]) {
		return
	}
	if m.lonelyNext == nil {
		m.lonelyNext = map[string]time.Time{}
	}
	// Far in the future while the join runs; its end sets the pace.
	m.lonelyNext[n.Name] = now.Add(time.Hour)
	m.joinDone.Add(1)
	go func() {
		defer m.joinDone.Done()
		_, err := m.ml.Join([]string{addr})
		m.rejoinMu.Lock()
		m.lonelyNext[n.Name] = time.Now().Add(lonelyJoinEvery)
		m.rejoinMu.Unlock()
		if err != nil {
			m.log.Debug("a member that knows nobody did not answer a join", zap.String("member", n.Name), zap.String("addr", addr), zap.Error(errtext.OneLine(err)))
			return
		}
		m.log.Info("joined a member that knew nobody (restarted without its member list)", zap.String("member", n.Name), zap.String("addr", addr))
	}()
}
