package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
)

// VotersProtocolID is the libp2p stream protocol on which a follower or an
// observer forwards a voter change to the leader (docs/voters.md): one
// request frame, one reply frame, then both close. Only current members
// may open it, as for election streams.
const VotersProtocolID = "/conclave/voters/1"

// MaxForwardBytes bounds a forwarded request or reply body. A reply holds at
// most two voter lists of protocols.MaxVotersLen bytes plus a short error.
const MaxForwardBytes = 2*protocols.MaxVotersLen + 1024

// maxForwardsInFlight bounds the forwarded changes one host serves at once:
// each waits up to its deadline for a commit, and one change at a time can
// be in flight anyway.
const maxForwardsInFlight = 4

// ForwardTimeout bounds how long the leader works on one forwarded change
// before answering (the caller's own deadline may be shorter).
const ForwardTimeout = 7 * time.Second

// Reply codes of a forwarded voter change.
const (
	// ForwardOK: the change is committed; the reply holds the configuration.
	ForwardOK uint8 = iota
	// ForwardRefused: the leader refused it (a change in flight, an
	// unknown or unreachable member, the quorum would be lost).
	ForwardRefused
	// ForwardUnavailable: the leader could not finish it (it lost its
	// leadership, the deadline passed, it is stopping).
	ForwardUnavailable
	// ForwardNotLeader: the receiver does not lead (leadership moved).
	ForwardNotLeader
	// ForwardBadRequest: the request names no member, or two.
	ForwardBadRequest
	forwardCodes
)

// VoterRequest is a forwarded voter change: exactly one of Add and Remove;
// neither asks the leader for its voter configuration (agent voters on a
// follower or an observer, whose own view may lag).
type VoterRequest struct {
	Add    string `msgpack:"a,omitempty"`
	Remove string `msgpack:"r,omitempty"`
	// Election names a named election ("" for the default one). Only
	// members that run named elections lead one, so an agent from
	// before them, which would skip the key, never receives it.
	Election string `msgpack:"el,omitempty"`
}

// VoterReply is the leader's answer to a VoterRequest.
type VoterReply struct {
	Code uint8 `msgpack:"c"`
	// Error says why, for every code but ForwardOK.
	Error string `msgpack:"e,omitempty"`
	// Term, Index and Voters are the committed configuration (ForwardOK).
	Term   uint64 `msgpack:"t,omitempty"`
	Index  uint64 `msgpack:"i,omitempty"`
	Voters string `msgpack:"v,omitempty"`
	// Leader is the name of the agent that answered.
	Leader string `msgpack:"l,omitempty"`
	// PendingTerm, PendingIndex and PendingVoters are a newer
	// configuration not committed yet (a query's answer), if any.
	PendingTerm   uint64 `msgpack:"pt,omitempty"`
	PendingIndex  uint64 `msgpack:"pi,omitempty"`
	PendingVoters string `msgpack:"pv,omitempty"`
}

// VoterHandler serves one forwarded change from member from. It must
// return by ctx's deadline.
type VoterHandler func(ctx context.Context, from protocols.ID, req VoterRequest) VoterReply

// Forwarder is implemented by transports that can forward voter changes
// (Host; not the in-memory network).
type Forwarder interface {
	// HandleVoters installs h for changes forwarded to this node.
	HandleVoters(h VoterHandler)
	// ForwardVoters sends req to member to and waits for its reply.
	ForwardVoters(ctx context.Context, to protocols.ID, req VoterRequest) (VoterReply, error)
}

var _ Forwarder = (*Host)(nil)

// fields of the forwarded messages, and whether each is a string.
var (
	requestFields = map[string]bool{"a": true, "r": true}
	replyFields   = map[string]bool{"c": false, "e": true, "t": false, "i": false, "v": true, "l": true, "pt": false, "pi": false, "pv": true}
)

// EncodeVoterRequest returns the frame (length prefix and body) of req.
func EncodeVoterRequest(req VoterRequest) ([]byte, error) { return encodeForward(req) }

// EncodeVoterReply returns the frame of rep.
func EncodeVoterReply(rep VoterReply) ([]byte, error) { return encodeForward(rep) }

func encodeForward(v any) ([]byte, error) {
	body, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("transport: encode: %w", err)
	}
	if len(body) > MaxForwardBytes {
		return nil, fmt.Errorf("transport: encode: %w: %d bytes, at most %d", ErrFrameTooLarge, len(body), MaxForwardBytes)
	}
	out := make([]byte, HeaderLen, HeaderLen+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...), nil
}

// DecodeVoterRequest decodes a request body (without the length prefix).
// It checks the structure before decoding, so no length in the input is
// trusted, and refuses names longer than protocols.MaxNameLen.
func DecodeVoterRequest(body []byte) (VoterRequest, error) {
	var req VoterRequest
	if err := checkForward(body, requestFields); err != nil {
		return req, err
	}
	if err := msgpack.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(req.Add) > protocols.MaxNameLen || len(req.Remove) > protocols.MaxNameLen {
		return req, fmt.Errorf("%w: member name longer than %d bytes", ErrOutOfRange, protocols.MaxNameLen)
	}
	return req, nil
}

// DecodeVoterReply decodes a reply body (without the length prefix).
func DecodeVoterReply(body []byte) (VoterReply, error) {
	var rep VoterReply
	if err := checkForward(body, replyFields); err != nil {
		return rep, err
	}
	var w struct {
		Code   uint64 `msgpack:"c"`
		Error  string `msgpack:"e"`
		Term   uint64 `msgpack:"t"`
		Index  uint64 `msgpack:"i"`
		Voters string `msgpack:"v"`
		Leader string `msgpack:"l"`
		PTerm  uint64 `msgpack:"pt"`
		PIndex uint64 `msgpack:"pi"`
		PVoter string `msgpack:"pv"`
	}
	if err := msgpack.Unmarshal(body, &w); err != nil {
		return rep, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case w.Code >= uint64(forwardCodes):
		return rep, fmt.Errorf("%w: reply code %d", ErrOutOfRange, w.Code)
	case len(w.Voters) > protocols.MaxVotersLen || len(w.PVoter) > protocols.MaxVotersLen:
		return rep, fmt.Errorf("%w: voters %d and %d bytes, at most %d", ErrOutOfRange, len(w.Voters), len(w.PVoter), protocols.MaxVotersLen)
	case len(w.Leader) > protocols.MaxNameLen:
		return rep, fmt.Errorf("%w: leader name %d bytes, at most %d", ErrOutOfRange, len(w.Leader), protocols.MaxNameLen)
	}
	return VoterReply{Code: uint8(w.Code), Error: w.Error, Term: w.Term, Index: w.Index, Voters: w.Voters, Leader: w.Leader,
		PendingTerm: w.PTerm, PendingIndex: w.PIndex, PendingVoters: w.PVoter}, nil
}

// checkForward walks a flat msgpack map whose known keys are strings or
// unsigned integers (fields says which); unknown keys are skipped, so a
// newer peer may add some.
func checkForward(b []byte, fields map[string]bool) error {
	w := walker{b: b}
	n, err := w.mapLen()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for range n {
		key, err := w.str()
		if err != nil {
			return err
		}
		isString, known := fields[string(key)]
		switch {
		case !known:
			err = w.skip(1)
		case seen[string(key)]:
			return fmt.Errorf("%w: duplicate field %q", ErrMalformed, key)
		case isString:
			_, err = w.strValue()
		default:
			_, err = w.unsigned()
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		if known {
			seen[string(key)] = true
		}
	}
	if w.off != len(b) {
		return fmt.Errorf("%w: %d of %d bytes", ErrTrailingBytes, len(b)-w.off, len(b))
	}
	return nil
}

// readForward reads one length-prefixed body of at most MaxForwardBytes;
// the length is checked before anything is allocated.
func readForward(r io.Reader) ([]byte, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxForwardBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooLarge, n, MaxForwardBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		return nil, err
	}
	return body, nil
}

// HandleVoters implements Forwarder.
func (t *Host) HandleVoters(h VoterHandler) {
	sem := make(chan struct{}, maxForwardsInFlight)
	t.h.SetStreamHandler(protocol.ID(VotersProtocolID), func(s network.Stream) { t.serveVoters(s, h, sem) })
}

func (t *Host) serveVoters(s network.Stream, h VoterHandler, sem chan struct{}) {
	remote := s.Conn().RemotePeer()
	t.mu.Lock()
	id, member := t.byPeer[remote]
	if t.closed || !member {
		t.mu.Unlock()
		if !member {
			t.stats.drop(DropUnauthorized)
		}
		_ = s.Reset()
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	log := t.log.With(zap.Uint64("member", uint64(id)), zap.Stringer("peer", remote))

	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	default:
		t.answerVoters(s, log, VoterReply{Code: ForwardUnavailable, Error: "the leader is busy with other forwarded voter changes; retry"})
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, ForwardTimeout)
	defer cancel()
	_ = s.SetReadDeadline(time.Now().Add(t.cfg.DialTimeout))
	body, err := readForward(s)
	if err != nil {
		if r := Reason(err); r != ReasonOther {
			t.stats.drop(r)
		}
		warnLimited(log, "refusing forwarded voter change: bad frame", zap.Error(err))
		_ = s.Reset()
		return
	}
	req, err := DecodeVoterRequest(body)
	if err != nil {
		t.stats.drop(Reason(err))
		warnLimited(log, "refusing forwarded voter change: bad request", zap.Error(err))
		_ = s.Reset()
		return
	}
	t.answerVoters(s, log, h(ctx, id, req))
}

func (t *Host) answerVoters(s network.Stream, log *zap.Logger, rep VoterReply) {
	frame, err := EncodeVoterReply(rep)
	if err != nil {
		log.Warn("cannot encode the answer to a forwarded voter change", zap.Error(err))
		_ = s.Reset()
		return
	}
	_ = s.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	if _, err := s.Write(frame); err != nil {
		log.Debug("answering a forwarded voter change", zap.Error(err))
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

// ForwardVoters implements Forwarder.
func (t *Host) ForwardVoters(ctx context.Context, to protocols.ID, req VoterRequest) (VoterReply, error) {
	ps := t.peerOf(to)
	if ps == nil {
		return VoterReply{}, fmt.Errorf("transport: forward voter change: member %d is not a known peer", to)
	}
	frame, err := EncodeVoterRequest(req)
	if err != nil {
		return VoterReply{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	s, err := t.h.NewStream(dctx, ps.pid, protocol.ID(VotersProtocolID))
	cancel()
	if err != nil {
		return VoterReply{}, fmt.Errorf("transport: forward voter change: open stream: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(deadline)
	}
	if _, err := s.Write(frame); err != nil {
		_ = s.Reset()
		return VoterReply{}, fmt.Errorf("transport: forward voter change: %w", errors.Join(ctx.Err(), err))
	}
	_ = s.CloseWrite()
	body, err := readForward(s)
	if err != nil {
		_ = s.Reset()
		return VoterReply{}, fmt.Errorf("transport: forward voter change: reply: %w", errors.Join(ctx.Err(), err))
	}
	_ = s.Close()
	rep, err := DecodeVoterReply(body)
	if err != nil {
		return VoterReply{}, fmt.Errorf("transport: forward voter change: reply: %w", err)
	}
	return rep, nil
}
