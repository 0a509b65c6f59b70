package transport

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"
)

// AdmitProtocolID is the stream protocol of the admission handshake. Every
// connection of a keyed cluster runs it once, right after Noise, before
// any other stream is accepted or opened on it.
const AdmitProtocolID = "/conclave/admit/1"

// admitDomain separates admission MACs from every other use of the
// cluster key (memberlist encrypts gossip with the raw key).
const admitDomain = "conclave libp2p admission v1\x00"

// Sizes of the handshake's parts.
const (
	admitNonceLen = 32
	admitMACLen   = sha256.Size
	// admitMaxKeys bounds the MACs one side sends: one per installed key
	// (keyring.MaxKeys is 8), with room to spare.
	admitMaxKeys = 16
)

// ErrNotAdmitted: the peer proved none of this node's installed cluster
// keys, or did not run the admission handshake.
var ErrNotAdmitted = errors.New("peer proved no installed cluster key")

// admitFailures counts connections refused by admission, in this process.
var admitFailures atomic.Uint64

// AdmissionFailures returns how many connections failed the admission
// handshake in this process (all hosts together): a peer with none of the
// installed keys, or one that is not a conclave node.
func AdmissionFailures() uint64 { return admitFailures.Load() }

// AdmitKey derives the admission key of a cluster key.
func AdmitKey(clusterKey []byte) []byte {
	h := sha256.New()
	h.Write([]byte(admitDomain))
	h.Write(clusterKey)
	return h.Sum(nil)
}

// admitMAC is one side's proof of one key: an HMAC over the role, both
// peer ids (bound to the connection by Noise, so a proof cannot be relayed
// to another connection) and both nonces (so it cannot be replayed).
func admitMAC(key []byte, role byte, initiator, responder peer.ID, nonceI, nonceR []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte{role})
	m.Write([]byte(initiator))
	m.Write([]byte{0})
	m.Write([]byte(responder))
	m.Write(nonceI)
	m.Write(nonceR)
	return m.Sum(nil)
}

// Roles in admitMAC: the responder proves first, so an initiator that
// holds no key learns nothing it could use.
const (
	roleResponder = 'R'
	roleInitiator = 'I'
)

// encodeMACs writes a count byte and the MACs.
func encodeMACs(macs [][]byte) []byte {
	out := make([]byte, 0, 1+len(macs)*admitMACLen)
	out = append(out, byte(len(macs)))
	for _, m := range macs {
		out = append(out, m...)
	}
	return out
}

// readMACs reads what encodeMACs wrote, bounded before anything is
// allocated.
func readMACs(r io.Reader) ([][]byte, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	if n[0] == 0 || n[0] > admitMaxKeys {
		return nil, fmt.Errorf("admission: %d proofs, want 1 … %d", n[0], admitMaxKeys)
	}
	buf := make([]byte, int(n[0])*admitMACLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	out := make([][]byte, n[0])
	for i := range out {
		out[i] = buf[i*admitMACLen : (i+1)*admitMACLen]
	}
	return out, nil
}

// anyMatch reports which installed key one of the peer's proofs matches,
// comparing in constant time; -1 when none does.
func anyMatch(keys [][]byte, got [][]byte, role byte, initiator, responder peer.ID, nonceI, nonceR []byte) int {
	for i, k := range keys {
		want := admitMAC(k, role, initiator, responder, nonceI, nonceR)
		for _, g := range got {
			if hmac.Equal(want, g) {
				return i
			}
		}
	}
	return -1
}

// admission runs and remembers the handshake of each connection.
type admission struct {
	// keys returns the admission keys (AdmitKey of each installed cluster
	// key) at this moment: the keyring changes at run time.
	keys    func() [][]byte
	timeout time.Duration
	// refused is told of every peer that failed admission (for logs and
	// problems); it must not block.
	refused func(p peer.ID, err error)

	// pnet, when set, knows the connections that run under libp2p's
	// private network with an old agent (pnetcompat.go): they are
	// admitted by their key, without the handshake.
	pnet *pnetCompat

	mu    sync.Mutex
	conns map[network.Conn]*admitState
}

type admitState struct {
	done chan struct{}
	err  error
	// key is the admission key the peer proved (set before done closes):
	// when it is removed from the ring, the connection is closed.
	key []byte
	// pnet: the connection runs under pnet with key, and had no
	// handshake; refused (err set), it is closed by whoever sees it.
	pnet bool
}

// state returns c's state, creating it when create is set.
func (a *admission) state(c network.Conn, create bool) (*admitState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.conns[c]
	if !ok && a.pnet != nil {
		if key, under := a.pnet.admitKey(c); under {
			st = a.pnetState(key)
			a.conns[c] = st
			return st, false
		}
	}
	if !ok && create {
		st = &admitState{done: make(chan struct{})}
		a.conns[c] = st
		return st, true
	}
	return st, false
}

// pnetState is the settled state of a connection under pnet with key
// (an admission key): admitted while key is installed. revalidate closes
// it once key is removed, as it does an admitted connection.
func (a *admission) pnetState(key []byte) *admitState {
	st := &admitState{done: make(chan struct{}), key: key, pnet: true}
	if !slices.ContainsFunc(a.keys(), func(k []byte) bool { return hmac.Equal(k, key) }) {
		// Removed after the connection was made, before any stream.
		st.err = fmt.Errorf("admission: %w (the key of its pnet was removed)", ErrNotAdmitted)
		admitFailures.Add(1)
	}
	close(st.done)
	return st
}

func (a *admission) forget(c network.Conn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

func (a *admission) finish(st *admitState, p peer.ID, err error) {
	st.err = err
	close(st.done)
	if err != nil {
		admitFailures.Add(1)
		if a.refused != nil {
			a.refused(p, err)
		}
	}
}

// wait waits for c's handshake; ctx bounds it.
func wait(ctx context.Context, st *admitState) error {
	select {
	case <-st.done:
		return st.err
	case <-ctx.Done():
		return fmt.Errorf("admission: %w", ctx.Err())
	}
}

// ensure admits c before a stream is opened on it: it runs the handshake
// as initiator unless one already ran or runs (either side may start it).
func (a *admission) ensure(ctx context.Context, c network.Conn) error {
	st, created := a.state(c, true)
	if !created {
		err := wait(ctx, st)
		if err != nil && st.pnet {
			_ = c.Close()
		}
		return err
	}
	key, err := a.initiate(ctx, c)
	if err != nil {
		_ = c.Close()
	}
	st.key = key
	a.finish(st, c.RemotePeer(), err)
	return err
}

func (a *admission) initiate(ctx context.Context, c network.Conn) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	s, err := c.NewStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("admission: open stream: %w", err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if err := msmux.SelectProtoOrFail(protocol.ID(AdmitProtocolID), s); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: the peer does not run it (an older conclave, or not conclave): %w", err)
	}
	nonceI := make([]byte, admitNonceLen)
	if _, err := rand.Read(nonceI); err != nil {
		return nil, err
	}
	if _, err := s.Write(nonceI); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: %w", err)
	}
	nonceR := make([]byte, admitNonceLen)
	if _, err := io.ReadFull(s, nonceR); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: the peer refused us (it has none of our keys?): %w", err)
	}
	theirs, err := readMACs(s)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: %w", err)
	}
	self, remote := c.LocalPeer(), c.RemotePeer()
	keys := a.keys()
	matched := anyMatch(keys, theirs, roleResponder, self, remote, nonceI, nonceR)
	if matched < 0 {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: %w", ErrNotAdmitted)
	}
	mine := make([][]byte, len(keys))
	for i, k := range keys {
		mine[i] = admitMAC(k, roleInitiator, self, remote, nonceI, nonceR)
	}
	if _, err := s.Write(encodeMACs(mine)); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: %w", err)
	}
	var ok [1]byte
	if _, err := io.ReadFull(s, ok[:]); err != nil || ok[0] != 1 {
		_ = s.Reset()
		return nil, fmt.Errorf("admission: the peer refused our proof (it has none of our keys): %v", err)
	}
	return keys[matched], nil
}

// respond answers a handshake the peer started on s.
func (a *admission) respond(s network.Stream) {
	c := s.Conn()
	st, created := a.state(c, true)
	if !created {
		// Both sides started one at once: answer, and let whichever
		// finishes first settle the connection.
		st = &admitState{done: make(chan struct{})}
	}
	key, err := a.respondOn(s)
	if err != nil {
		_ = s.Reset()
	} else {
		_ = s.Close()
	}
	if created {
		if err != nil {
			_ = c.Close()
		}
		st.key = key
		a.finish(st, c.RemotePeer(), err)
	} else if err != nil {
		admitFailures.Add(1)
		if a.refused != nil {
			a.refused(c.RemotePeer(), err)
		}
	}
}

func (a *admission) respondOn(s network.Stream) ([]byte, error) {
	_ = s.SetDeadline(time.Now().Add(a.timeout))
	c := s.Conn()
	nonceI := make([]byte, admitNonceLen)
	if _, err := io.ReadFull(s, nonceI); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	nonceR := make([]byte, admitNonceLen)
	if _, err := rand.Read(nonceR); err != nil {
		return nil, err
	}
	self, remote := c.LocalPeer(), c.RemotePeer()
	keys := a.keys()
	mine := make([][]byte, len(keys))
	for i, k := range keys {
		mine[i] = admitMAC(k, roleResponder, remote, self, nonceI, nonceR)
	}
	if _, err := s.Write(append(nonceR, encodeMACs(mine)...)); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	theirs, err := readMACs(s)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	matched := anyMatch(keys, theirs, roleInitiator, remote, self, nonceI, nonceR)
	if matched < 0 {
		return nil, fmt.Errorf("admission: %w", ErrNotAdmitted)
	}
	if _, err := s.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	return keys[matched], nil
}

// check lets a stream the peer opened through once c is admitted: a
// well-behaved peer admits the connection before it opens anything else,
// so a connection with no handshake at all is refused at once.
func (a *admission) check(ctx context.Context, c network.Conn) error {
	st, _ := a.state(c, false)
	if st == nil {
		return fmt.Errorf("admission: %w (no handshake)", ErrNotAdmitted)
	}
	if st.pnet && st.err != nil {
		_ = c.Close()
		return st.err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	return wait(ctx, st)
}

// revalidate closes every admitted connection whose peer proved a key
// that is no longer installed: removing a key must refuse whoever still
// uses it, not only their next connection. They reconnect, and are
// admitted again if they hold a key still installed.
func (a *admission) revalidate() int {
	keys := a.keys()
	var stale []network.Conn
	a.mu.Lock()
	for c, st := range a.conns {
		select {
		case <-st.done:
		default:
			continue // still running: it reads the keys afresh
		}
		if st.err == nil && !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(k, st.key) }) {
			stale = append(stale, c)
		}
	}
	a.mu.Unlock()
	for _, c := range stale {
		a.forget(c)
		_ = c.Close()
	}
	return len(stale)
}
