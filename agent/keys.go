package agent

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/internal/ratelog"
	"github.com/conclave-agent/conclave/keyring"
	"github.com/conclave-agent/conclave/localapi"
	"github.com/conclave-agent/conclave/membership"
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

// keyRefused returns the names of the members the transport refused, or
// gossip could not reach again, for want of a shared key within
// keyProblemWindow, sorted.
func (a *Agent) keyRefused() []string {
	var names []string
	// Gossip names a dead member it could not reach again for want of a
	// key: nothing else may dial a member that came back with only a
	// removed key (majority voters do not probe observers).
	if g, ok := a.cluster.(gossipKeyRefuser); ok {
		names = g.KeyRefused(keyProblemWindow)
	}
	var refused map[protocols.ID]time.Time
	if r, ok := a.tr.(admissionRefuser); ok {
		refused = r.AdmissionRefused(keyProblemWindow)
	}
	if len(refused) > 0 {
		for _, m := range a.cluster.Members() {
			if _, ok := refused[m.ID]; ok {
				names = append(names, m.Name)
				delete(refused, m.ID)
			}
		}
		for id := range refused {
			names = append(names, fmt.Sprintf("id %d", id))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// gossipKeyRefuser is the part of the gossip layer that names dead
// members it could not reach again for want of a shared key.
type gossipKeyRefuser interface {
	KeyRefused(window time.Duration) []string
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

// keyQueryWait bounds each round of a cluster-wide key step: a member that
// has not answered by then is named as silent. A live member answers a
// loopback or LAN query in milliseconds; the round is short enough that
// two of them (a check, then the step) fit in the socket's request
// timeout.
const keyQueryWait = 3 * time.Second

// keyRequestMaxAge is how far a key request's send time may be from this
// agent's clock. Gossip is encrypted with the cluster key, so only a key
// holder can make a request; a recording of one replayed later is refused
// here, and one replayed within the window by its id.
const keyRequestMaxAge = time.Minute

// keyQueries is the agent's part of the cluster-wide key steps.
type keyQueries struct {
	q membership.Querier // nil when the cluster cannot query
	// refuseLog limits the lines for refused requests: on a cluster
	// without a key, whoever reaches the gossip port can send them.
	refuseLog *ratelog.Limiter
	// seen holds the ids of the key requests answered within twice
	// keyRequestMaxAge, when each came; guarded by the agent's ringMu.
	seen map[[membership.QueryIDLen]byte]time.Time
}

// serveKeyQueries makes this agent answer key requests from other members,
// when its cluster can carry them.
func (a *Agent) serveKeyQueries() {
	q, ok := a.cluster.(membership.Querier)
	if !ok {
		return
	}
	a.keyq = keyQueries{q: q, refuseLog: ratelog.New(10 * time.Second), seen: make(map[[membership.QueryIDLen]byte]time.Time)}
	q.ServeQueries(a.answerKeyQuery)
}

// answerKeyQuery answers a key request from member from: its step applied
// here, and the keys then installed.
func (a *Agent) answerKeyQuery(from string, id [membership.QueryIDLen]byte, body []byte) []byte {
	ans := a.keyAnswer(from, id, body)
	b, err := keyring.AppendAnswer(nil, ans)
	if err != nil {
		b, _ = keyring.AppendAnswer(nil, keyring.Answer{Err: err.Error()})
	}
	return b
}

func (a *Agent) keyAnswer(from string, id [membership.QueryIDLen]byte, body []byte) keyring.Answer {
	req, err := keyring.DecodeRequest(body)
	op := zap.Skip()
	if err == nil {
		op = zap.Stringer("op", req.Op)
	}
	refuse := func(why string) keyring.Answer {
		if ok, n := a.keyq.refuseLog.Allow(time.Now()); ok {
			a.log.Warn("refusing a key request", zap.String("from", from), op,
				zap.String("reason", why), zap.Uint64("suppressed_since_last", n))
		}
		return keyring.Answer{Err: why, Keys: a.ring.Load().Keys()}
	}
	if err != nil {
		return refuse(err.Error())
	}
	now := time.Now()
	if age := now.Sub(req.Sent); age > keyRequestMaxAge || age < -keyRequestMaxAge {
		return refuse(fmt.Sprintf("request sent %v from this member's clock, beyond %v: refused as a possible replay; check both members' clocks (NTP)", age.Round(time.Millisecond), keyRequestMaxAge))
	}
	a.ringMu.Lock()
	for k, at := range a.keyq.seen {
		if now.Sub(at) > 2*keyRequestMaxAge {
			delete(a.keyq.seen, k)
		}
	}
	_, dup := a.keyq.seen[id]
	a.keyq.seen[id] = now
	a.ringMu.Unlock()
	if dup {
		return refuse("request already answered: refused as a replay")
	}
	if req.Op == keyring.OpList {
		return keyring.Answer{Keys: a.ring.Load().Keys()}
	}
	next, err := a.changeRing(func(r keyring.Ring) (keyring.Ring, error) { return applyKeyOp(r, req.Op, req.Key) })
	if err != nil {
		return refuse(err.Error())
	}
	a.log.Info("cluster keys changed at a member's request", zap.String("from", from), zap.Stringer("op", req.Op),
		zap.String("key", keyring.Fingerprint(req.Key)), zap.String("primary", keyring.Fingerprint(next.Primary())), zap.Int("installed", len(next.Keys())))
	return keyring.Answer{Keys: next.Keys()}
}

// applyKeyOp is one rotation step on a ring.
func applyKeyOp(r keyring.Ring, op keyring.Op, key []byte) (keyring.Ring, error) {
	switch op {
	case keyring.OpInstall:
		return r.Install(key)
	case keyring.OpUse:
		return r.Use(key)
	case keyring.OpRemove:
		return r.Remove(key)
	}
	return r, fmt.Errorf("keyring: %v is not a rotation step", op)
}

// keyOps maps the socket's op names to the wire's.
var keyOps = map[string]keyring.Op{"": keyring.OpList, api.KeyInstall: keyring.OpInstall, api.KeyUse: keyring.OpUse, api.KeyRemove: keyring.OpRemove}

// memberKeys is one member's part in a key round: its answer, or why it
// has none.
type memberKeys struct {
	name string
	ans  keyring.Answer
	err  error
}

// keyRound asks every member in ask for req, this agent itself through its
// own ring (last, so that a step that changes this agent's primary or
// removes a key does not keep the others from reading its request or it
// from reading their answers). It returns one result per member, this
// agent's last.
func (a *Agent) keyRound(ctx context.Context, req keyring.Request, ask []string) ([]memberKeys, error) {
	body, err := keyring.AppendRequest(nil, req)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, keyQueryWait)
	defer cancel()
	var out []memberKeys
	if len(ask) > 0 {
		for _, ans := range a.keyq.q.Query(ctx, ask, body) {
			r := memberKeys{name: ans.Member, err: ans.Err}
			if r.err == nil {
				r.ans, r.err = keyring.DecodeAnswer(ans.Body)
			}
			out = append(out, r)
		}
	}
	self := memberKeys{name: a.cfg.Node.Name}
	if req.Op == keyring.OpList {
		self.ans.Keys = a.ring.Load().Keys()
	} else if next, err := a.changeRing(func(r keyring.Ring) (keyring.Ring, error) { return applyKeyOp(r, req.Op, req.Key) }); err != nil {
		self.ans = keyring.Answer{Err: err.Error(), Keys: a.ring.Load().Keys()}
	} else {
		self.ans.Keys = next.Keys()
		a.log.Info("cluster keys changed", zap.Stringer("op", req.Op), zap.String("key", keyring.Fingerprint(req.Key)),
			zap.String("primary", keyring.Fingerprint(next.Primary())), zap.Int("installed", len(next.Keys())))
	}
	return append(out, self), nil
}

// ClusterKeys implements localapi.ClusterKeysBackend: one step of a
// rotation (or a list) on every member. Members counts every member not
// known to have left; a dead one is not asked and is named. A use or a
// remove first asks every member for its keys, and is refused before any
// member changes when one is not ready: a use when a member lacks the key
// (or, unless c.Force, did not answer or is down), a remove when a member
// uses the key as its primary (always) or did not answer (unless
// c.Force).
func (b backend) ClusterKeys(ctx context.Context, c api.ClusterKeyChange) (api.KeyReport, error) {
	a := b.a
	op, ok := keyOps[c.Op]
	if !ok {
		return api.KeyReport{}, fmt.Errorf("%w: op %q is not install, use or remove", localapi.ErrBadKeys, c.Op)
	}
	var key []byte
	if op != keyring.OpList {
		k, err := keyring.ParseKey(c.Key)
		if err != nil {
			return api.KeyReport{}, fmt.Errorf("%w: %v", localapi.ErrBadKeys, err)
		}
		key = k
	}
	if a.ring.Load().Empty() && op != keyring.OpList {
		return api.KeyReport{}, fmt.Errorf("%w: this agent runs without a cluster key: set gossip.key on every member and restart them to encrypt", localapi.ErrBadKeys)
	}
	rep := api.KeyReport{Op: op.String(), Failed: []api.KeyFailure{}, Keys: []api.KeyCount{}}
	if key != nil {
		rep.Fingerprint = keyring.Fingerprint(key)
	}
	var ask []string
	for _, m := range a.cluster.Members() {
		if m.Name == a.cfg.Node.Name {
			continue
		}
		switch m.State {
		case membership.StateAlive, membership.StateSuspect:
			if a.keyq.q == nil {
				rep.Failed = append(rep.Failed, api.KeyFailure{Member: m.Name, Error: "not asked: this agent's cluster cannot carry key requests"})
				break
			}
			ask = append(ask, m.Name)
		case membership.StateDead:
			rep.Failed = append(rep.Failed, api.KeyFailure{Member: m.Name, Error: "down (gossip declared it dead): not asked; run this step again once it is back"})
		default:
			continue // left: it said goodbye
		}
		rep.Members++
	}
	rep.Members++ // this agent
	down := len(rep.Failed)

	if op == keyring.OpUse || op == keyring.OpRemove {
		check, err := a.keyRound(ctx, keyring.Request{Op: keyring.OpList, Sent: time.Now()}, ask)
		if err != nil {
			return api.KeyReport{}, err
		}
		if err := refuseKeyStep(op, key, check, rep.Failed, c.Force); err != nil {
			return api.KeyReport{}, err
		}
	}
	results, err := a.keyRound(ctx, keyring.Request{Op: op, Key: key, Sent: time.Now()}, ask)
	if err != nil {
		return api.KeyReport{}, err
	}
	counts := map[string]*api.KeyCount{}
	for _, r := range results {
		switch {
		case r.err != nil:
			rep.Failed = append(rep.Failed, api.KeyFailure{Member: r.name, Error: r.err.Error()})
			continue
		case r.ans.Err != "":
			rep.Failed = append(rep.Failed, api.KeyFailure{Member: r.name, Error: r.ans.Err})
		default:
			rep.Acked++
		}
		for i, k := range r.ans.Keys {
			s := keyring.Encode(k)
			kc := counts[s]
			if kc == nil {
				kc = &api.KeyCount{Key: s, Fingerprint: keyring.Fingerprint(k)}
				counts[s] = kc
			}
			kc.Installed++
			if i == 0 {
				kc.Primary++
			}
		}
	}
	for _, kc := range counts {
		rep.Keys = append(rep.Keys, *kc)
	}
	slices.SortFunc(rep.Keys, func(x, y api.KeyCount) int {
		if x.Primary != y.Primary {
			return y.Primary - x.Primary
		}
		if x.Installed != y.Installed {
			return y.Installed - x.Installed
		}
		return strings.Compare(x.Fingerprint, y.Fingerprint)
	})
	slices.SortFunc(rep.Failed, func(x, y api.KeyFailure) int { return strings.Compare(x.Member, y.Member) })
	if op != keyring.OpList || rep.Acked < rep.Members {
		a.log.Info("cluster-wide key step", zap.String("op", rep.Op), zap.String("key", rep.Fingerprint),
			zap.Int("acked", rep.Acked), zap.Int("members", rep.Members), zap.Int("down", down), zap.Int("failed", len(rep.Failed)-down))
	}
	return rep, nil
}

// refuseKeyStep says why a use or a remove must not start, from every
// member's keys (check) and the members down: nil when it may.
func refuseKeyStep(op keyring.Op, key []byte, check []memberKeys, down []api.KeyFailure, force bool) error {
	var blocking, unsure []string
	for _, d := range down {
		unsure = append(unsure, d.Member+" is down")
	}
	for _, r := range check {
		switch {
		case r.err != nil:
			unsure = append(unsure, fmt.Sprintf("%s did not answer (%v)", r.name, r.err))
		case op == keyring.OpUse && !slices.ContainsFunc(r.ans.Keys, func(k []byte) bool { return bytes.Equal(k, key) }):
			if force {
				continue // it refuses the step itself, and is named then
			}
			blocking = append(blocking, r.name+" lacks it")
		case op == keyring.OpRemove && len(r.ans.Keys) > 0 && bytes.Equal(r.ans.Keys[0], key):
			blocking = append(blocking, r.name+" uses it as its primary")
		}
	}
	slices.Sort(blocking)
	slices.Sort(unsure)
	if op == keyring.OpRemove && len(blocking) > 0 {
		return fmt.Errorf("%w: remove %s: %s: make another key primary there first (agent keys use KEY); no member changed",
			localapi.ErrKeysRefused, keyring.Fingerprint(key), strings.Join(blocking, ", "))
	}
	if force {
		return nil
	}
	if op == keyring.OpUse && len(blocking) > 0 {
		blocking = append(blocking, unsure...)
		return fmt.Errorf("%w: use %s: %s: install it on every member first (agent keys install KEY), or -force; no member changed",
			localapi.ErrKeysRefused, keyring.Fingerprint(key), strings.Join(blocking, ", "))
	}
	if len(unsure) > 0 {
		return fmt.Errorf("%w: %v %s: not every member could be checked: %s; run again once they are back, or -force; no member changed",
			localapi.ErrKeysRefused, op, keyring.Fingerprint(key), strings.Join(unsure, ", "))
	}
	return nil
}
