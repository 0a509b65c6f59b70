package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/protocols"
)

// loadKeyring restores the installed cluster keys from the data directory.
// On first start with gossip.key the ring is that key alone, and is saved:
// from then on the file, which rotations change, wins over gossip.key.
func (a *Agent) loadKeyring(key []byte) error {
	dir := a.cfg.Node.DataDir
	ring, err := keyring.Load(dir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	switch {
	case ring.Empty() && key != nil:
		ring = keyring.New(key)
		if err := keyring.Save(dir, ring); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	case !ring.Empty() && key != nil && !ring.Has(key):
		a.log.Warn("gossip.key is not installed in the keyring, which wins: set gossip.key to the key in use (agent keys list) to keep this warning away",
			zap.String("keyring", filepath.Join(dir, keyring.File)),
			zap.String("gossip.key", keyring.Fingerprint(key)),
			zap.String("primary", keyring.Fingerprint(ring.Primary())))
	}
	a.ring.Store(&ring)
	return nil
}

// keys returns the transport's view of the installed keys: read at each
// handshake, so a change applies to the next connection.
func (a *Agent) keys() func() [][]byte {
	if a.ring.Load().Empty() {
		return nil
	}
	return func() [][]byte { return a.ring.Load().Keys() }
}

// keysChanger is the part of the transport that closes connections
// admitted with a key that is no longer installed.
type keysChanger interface{ KeysChanged() int }

// changeRing installs the ring change makes of the current one: it is
// saved first (a crash must not forget a key the cluster may already use),
// then gossip and the transport take it.
func (a *Agent) changeRing(change func(keyring.Ring) (keyring.Ring, error)) (keyring.Ring, error) {
	a.ringMu.Lock()
	defer a.ringMu.Unlock()
	ring, err := change(*a.ring.Load())
	if err != nil {
		return ring, err
	}
	return ring, a.setRing(ring)
}

// setRing installs ring; called with ringMu held.
func (a *Agent) setRing(ring keyring.Ring) error {
	if ring.Empty() {
		return fmt.Errorf("agent: refusing to remove every cluster key")
	}
	if a.ring.Load().Empty() {
		return fmt.Errorf("agent: this agent runs without a cluster key: set gossip.key on every member and restart them to encrypt")
	}
	if err := keyring.Save(a.cfg.Node.DataDir, ring); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.ring.Store(&ring)
	if s, ok := a.cluster.(interface{ SetKeys([][]byte) error }); ok {
		if err := s.SetKeys(ring.Keys()); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	if kc, ok := a.tr.(keysChanger); ok {
		if n := kc.KeysChanged(); n > 0 {
			a.log.Info("closed connections admitted with a removed key", zap.Int("connections", n))
		}
	}
	return nil
}

// keyProblemWindow is how long a member refused by the admission
// handshake stays named in problems: long enough to be seen between two
// polls, short enough that a member fixed by installing the key drops out
// soon after.
const keyProblemWindow = time.Minute

// admissionRefuser is the part of the transport that names members it
// refused for want of an installed key.
type admissionRefuser interface {
	AdmissionRefused(window time.Duration) map[protocols.ID]time.Time
}

// keyRefused returns the names of the members the transport refused for
// want of a shared key within keyProblemWindow, sorted.
func (a *Agent) keyRefused() []string {
	r, ok := a.tr.(admissionRefuser)
	if !ok {
		return nil
	}
	refused := r.AdmissionRefused(keyProblemWindow)
	if len(refused) == 0 {
		return nil
	}
	var names []string
	for _, m := range a.cluster.Members() {
		if _, ok := refused[m.ID]; ok {
			names = append(names, m.Name)
			delete(refused, m.ID)
		}
	}
	for id := range refused {
		names = append(names, fmt.Sprintf("id %d", id))
	}
	slices.Sort(names)
	return names
}

// withKeyProblems adds a line per member that proved none of the installed
// keys: it has not installed the key in use, or still uses a removed one.
func (a *Agent) withKeyProblems(p api.Problems) api.Problems {
	names := a.keyRefused()
	if len(names) == 0 {
		return p
	}
	lines := p.List()
	for _, n := range names {
		lines = append(lines, fmt.Sprintf("member %s proved none of this agent's installed cluster keys within the last minute: it lacks the key in use or still uses a removed one (agent keys list; install the primary there)", n))
	}
	return api.NewProblems(lines)
}

// keysOf is the socket's view of a ring.
func keysOf(r keyring.Ring) api.Keys {
	k := api.Keys{Primary: keyring.Encode(r.Primary()), Installed: []string{}}
	if r.Empty() {
		k.Primary = ""
	}
	for _, key := range r.Keys() {
		k.Installed = append(k.Installed, keyring.Encode(key))
	}
	return k
}

// Keys implements localapi.KeysBackend.
func (b backend) Keys(context.Context) (api.Keys, error) {
	return keysOf(*b.a.ring.Load()), nil
}

// ChangeKeys implements localapi.KeysBackend: one idempotent step of a
// rotation on this agent.
func (b backend) ChangeKeys(_ context.Context, c api.KeyChange) (api.Keys, error) {
	key, err := keyring.ParseKey(c.Key)
	if err != nil {
		return api.Keys{}, fmt.Errorf("%w: %v", localapi.ErrBadKeys, err)
	}
	a := b.a
	next, err := a.changeRing(func(r keyring.Ring) (keyring.Ring, error) {
		switch c.Op {
		case api.KeyInstall:
			return r.Install(key)
		case api.KeyUse:
			return r.Use(key)
		case api.KeyRemove:
			return r.Remove(key)
		}
		return r, fmt.Errorf("op %q is not install, use or remove", c.Op)
	})
	if err != nil {
		return api.Keys{}, fmt.Errorf("%w: %v", localapi.ErrBadKeys, err)
	}
	a.log.Info("cluster keys changed", zap.String("op", c.Op), zap.String("key", keyring.Fingerprint(key)),
		zap.String("primary", keyring.Fingerprint(next.Primary())), zap.Int("installed", len(next.Keys())))
	return keysOf(next), nil
}
