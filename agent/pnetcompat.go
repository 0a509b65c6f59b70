package agent

import "github.com/conclave-agent/conclave/membership"

// peerVersions is the part of the transport that dials agents of an older
// peer protocol their own way: a keyed v0.1.0 agent only accepts libp2p's
// private network (transport.Host.SetPeerVersion).
type peerVersions interface {
	SetPeerVersion(peerID string, version uint16)
}

// notePeerVersions tells the transport each member's peer protocol
// version. It runs before the member reaches the cores, so the transport
// knows how to dial a member before the first message for it is queued.
func (a *Agent) notePeerVersions(members ...membership.Member) {
	pv, ok := a.tr.(peerVersions)
	if !ok {
		return
	}
	for _, m := range members {
		if m.PeerID != "" {
			pv.SetPeerVersion(m.PeerID, m.Version)
		}
	}
}
