package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// KeysBackend is implemented by backends that hold a keyring (PathKeys).
type KeysBackend interface {
	// Keys returns the installed keys.
	Keys(ctx context.Context) (api.Keys, error)
	// ChangeKeys installs, uses or removes one key, durably, and returns
	// the keys then installed. A refused change (a bad key, removing the
	// primary) is an error wrapping ErrBadKeys.
	ChangeKeys(ctx context.Context, c api.KeyChange) (api.Keys, error)
}

// ClusterKeysBackend is implemented by backends that can run a key step
// on every member (PathClusterKeys).
type ClusterKeysBackend interface {
	// ClusterKeys runs c on every member and reports who acknowledged;
	// c.Op "" lists every member's keys. A step refused before any member
	// changed is an error wrapping ErrKeysRefused; a bad key one wrapping
	// ErrBadKeys.
	ClusterKeys(ctx context.Context, c api.ClusterKeyChange) (api.KeyReport, error)
}

// ErrBadKeys marks a refused key change → 400.
var ErrBadKeys = fmt.Errorf("keys: %w", errBadRequest)

// ErrKeysRefused marks a cluster-wide key step refused before any member
// changed, because some member is not ready for it → 409 Conflict.
var ErrKeysRefused = errors.New("key step refused")

// maxKeyChangeBytes bounds a key change body: an op and a 44-character key.
const maxKeyChangeBytes = 1 << 10

func (s *Server) addKeys(b Backend) {
	kb, ok := b.(KeysBackend)
	if !ok {
		return
	}
	// Reading needs write permission too: the answer holds the keys.
	s.handlers[api.PathKeys] = handler{method: http.MethodGet, post: true, body: true, write: true, secret: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		if r.Method != http.MethodPost {
			k, err := kb.Keys(ctx)
			if err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			writeJSON(w, http.StatusOK, k)
			return nil
		}
		c, err := s.readKeyChange(w, r)
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		k, err := kb.ChangeKeys(ctx, c)
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		writeJSON(w, http.StatusOK, k)
		return nil
	}}
	ckb, ok := b.(ClusterKeysBackend)
	if !ok {
		return
	}
	s.handlers[api.PathClusterKeys] = handler{method: http.MethodGet, post: true, body: true, write: true, secret: true, serve: func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		var c api.ClusterKeyChange
		if r.Method == http.MethodPost {
			kc, force, err := s.readClusterKeyChange(w, r)
			if err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			c = api.ClusterKeyChange{Op: kc.Op, Key: kc.Key, Force: force}
		}
		rep, err := ckb.ClusterKeys(ctx, c)
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		writeJSON(w, http.StatusOK, rep)
		return nil
	}}
}

// readClusterKeyChange reads a ClusterKeyChange body, bounded and strict
// like a KeyChange.
func (s *Server) readClusterKeyChange(w http.ResponseWriter, r *http.Request) (api.KeyChange, bool, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxKeyChangeBytes))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return api.KeyChange{}, false, fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	}
	var c api.ClusterKeyChange
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return api.KeyChange{}, false, fmt.Errorf("%w: the body must be {\"op\": \"install\"|\"use\"|\"remove\", \"key\": KEY, \"force\": BOOL}: %v", errBadRequest, err)
	}
	if err := checkKeyChange(c.Op, c.Key); err != nil {
		return api.KeyChange{}, false, err
	}
	return api.KeyChange{Op: c.Op, Key: c.Key}, c.Force, nil
}

// readKeyChange reads and checks a KeyChange body, bounded in size and
// time.
func (s *Server) readKeyChange(w http.ResponseWriter, r *http.Request) (api.KeyChange, error) {
	var c api.KeyChange
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxKeyChangeBytes))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return c, fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	}
	if err := decodeKeyChange(b, &c); err != nil {
		return c, err
	}
	return c, nil
}

// decodeKeyChange decodes a key change body strictly: one JSON object,
// known fields only, a known op and a key.
func decodeKeyChange(b []byte, c *api.KeyChange) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil || dec.More() {
		return fmt.Errorf("%w: the body must be {\"op\": \"install\"|\"use\"|\"remove\", \"key\": KEY}: %v", errBadRequest, err)
	}
	return checkKeyChange(c.Op, c.Key)
}

// checkKeyChange refuses an unknown op or a missing key.
func checkKeyChange(op, key string) error {
	switch op {
	case api.KeyInstall, api.KeyUse, api.KeyRemove:
	default:
		return fmt.Errorf("%w: op %q is not install, use or remove", errBadRequest, op)
	}
	if key == "" {
		return fmt.Errorf("%w: no key", errBadRequest)
	}
	return nil
}
