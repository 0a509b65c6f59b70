package compat

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/store"
	"github.com/conclave-agent/conclave/transport"
)

// Golden is what one build writes for the samples: the version of each
// surface and the bytes it puts on the wire and on disk. The generator
// writes the release's as golden.json; the test builds the tree's and
// compares.
type Golden struct {
	// Release and Commit name the build the copy came from (set by the
	// generator; empty for the tree).
	Release string `json:"release,omitempty"`
	Commit  string `json:"commit,omitempty"`

	// The surfaces' versions: a surface whose version changed may break
	// the copy; one whose version did not must not.
	ElectionProtocol string `json:"election_protocol"`
	VotersProtocol   string `json:"voters_protocol"`
	RecordVersion    uint16 `json:"record_version"`
	ObservedVersion  uint16 `json:"observed_version"`
	APIPrefix        string `json:"api_prefix"`

	// Frames are Messages() as length-prefixed election frames, in hex,
	// each with the message it encodes written out for people.
	Frames []Frame `json:"frames"`
	// VoterRequests and VoterReplies are the voter-forwarding bodies.
	VoterRequests []string `json:"voter_requests"`
	VoterReplies  []string `json:"voter_replies"`
	// HardStates and Observed are the data directory's records.
	HardStates []string `json:"hardstates"`
	Observed   []string `json:"observed"`
}

// Frame is one encoded election message.
type Frame struct {
	Message string `json:"message"`
	Hex     string `json:"hex"`
}

// Build encodes the samples with this build's encoders.
func Build() (Golden, error) {
	g := Golden{
		ElectionProtocol: transport.ProtocolID,
		VotersProtocol:   transport.VotersProtocolID,
		RecordVersion:    binary.BigEndian.Uint16(store.Encode(HardStates()[0])[4:6]),
		ObservedVersion:  binary.BigEndian.Uint16(store.EncodeObserved(1)[4:6]),
		APIPrefix:        APIPrefix(),
	}
	for _, m := range Messages() {
		b, err := transport.EncodeFrame(m)
		if err != nil {
			return g, fmt.Errorf("encode %v: %w", m, err)
		}
		g.Frames = append(g.Frames, Frame{Message: m.String(), Hex: hex.EncodeToString(b)})
	}
	for _, r := range VoterRequests() {
		b, err := transport.EncodeVoterRequest(r)
		if err != nil {
			return g, fmt.Errorf("encode voter request %+v: %w", r, err)
		}
		g.VoterRequests = append(g.VoterRequests, hex.EncodeToString(b))
	}
	for _, r := range VoterReplies() {
		b, err := transport.EncodeVoterReply(r)
		if err != nil {
			return g, fmt.Errorf("encode voter reply %+v: %w", r, err)
		}
		g.VoterReplies = append(g.VoterReplies, hex.EncodeToString(b))
	}
	for _, hs := range HardStates() {
		g.HardStates = append(g.HardStates, hex.EncodeToString(store.Encode(hs)))
	}
	for _, e := range ObservedEpochs() {
		g.Observed = append(g.Observed, hex.EncodeToString(store.EncodeObserved(e)))
	}
	return g, nil
}

// APIPrefix is the socket API's version prefix ("/v1"), read from its
// paths.
func APIPrefix() string { return path.Dir(api.PathStatus) }

// SocketJSON marshals Socket()'s bodies as the agent writes them, by name.
func SocketJSON() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, v := range Socket() {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}
