package membership

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Digester is implemented by clusters whose members publish a settings
// digest in their metadata (Membership; not the in-memory cluster).
type Digester interface {
	// SetDigest publishes d as this node's settings digest and ext as
	// its extension.
	SetDigest(d, ext string) error
}

var _ Digester = (*Membership)(nil)

// digestPushTimeout bounds one wait for memberlist to gossip new metadata.
const digestPushTimeout = time.Second

// kickDigest wakes a digest push waiting for the first join. Called from
// memberlist's callbacks: it never blocks.
func (m *Membership) kickDigest() {
	select {
	case m.joined <- struct{}{}:
	default:
	}
}

// SetDigest publishes d, a short description of the settings that must
// agree cluster-wide (the agent's business; at most MaxDigestLen bytes),
// and ext, settings an agent compares only when the member publishes them
// too (at most MaxDigestExtLen bytes; older agents skip it), in this
// node's metadata. Peers see them as Member.Digest and Member.DigestExt
// with an EventUpdate. When ext would not fit beside the rest, d is
// published without it (an older agent's metadata), rather than neither.
// It never blocks on the network: memberlist's UpdateNode waits until the
// change is gossiped, so a background goroutine calls it, once for any
// number of changes made meanwhile.
func (m *Membership) SetDigest(d, ext string) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	if m.nm.Digest == d && m.nm.DigestExt == ext {
		return nil
	}
	nm := m.nm
	nm.Digest, nm.DigestExt, nm.Leaving = d, ext, false
	if len(ext) > MaxDigestExtLen {
		return fmt.Errorf("membership: settings digest: %w: extension of %d bytes, at most %d", ErrMetaTooLarge, len(ext), MaxDigestExtLen)
	}
	meta, err := encodeMeta(nm)
	if errors.Is(err, ErrMetaTooLarge) && ext != "" && len(d) <= MaxDigestLen {
		m.log.Warn("publishing the settings digest without its extension: the metadata would exceed memberlist's limit", zap.Error(err))
		nm.DigestExt = ""
		meta, err = encodeMeta(nm)
	}
	if err != nil {
		return fmt.Errorf("membership: settings digest: %w", err)
	}
	nm.Leaving = true
	leaving, err := encodeMeta(nm)
	if err != nil {
		return fmt.Errorf("membership: settings digest: %w", err)
	}
	m.nm, m.meta, m.metaLeaving = nm, meta, leaving
	m.digestDirty = true
	if !m.digestPushing {
		m.digestPushing = true
		go m.pushDigest()
	}
	return nil
}

// pushDigest gossips the metadata until no change is left unsent.
func (m *Membership) pushDigest() {
	for {
		// Not before this node has joined someone: the join's push/pull
		// carries the metadata memberlist last announced, and an update
		// racing the join left a peer never learning of another (seen in
		// test/multihost). Until then, wait.
		for m.ml.NumMembers() < 2 {
			select {
			case <-m.stopJoin:
				m.metaMu.Lock()
				m.digestPushing = false
				m.metaMu.Unlock()
				return
			case <-m.joined:
			}
		}
		m.metaMu.Lock()
		if !m.digestDirty {
			m.digestPushing = false
			m.metaMu.Unlock()
			return
		}
		m.digestDirty = false
		m.metaMu.Unlock()

		m.lifeMu.Lock()
		if m.shutdown {
			m.lifeMu.Unlock()
			m.metaMu.Lock()
			m.digestPushing = false
			m.metaMu.Unlock()
			return
		}
		err := m.ml.UpdateNode(digestPushTimeout)
		m.lifeMu.Unlock()
		if err != nil {
			m.log.Debug("settings digest not gossiped yet", zap.Error(err))
		}
	}
}
