package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
	"github.com/conclave-agent/conclave/membership"
)

// rotateKey is a round that injects no fault: an operator rotates the
// cluster key from one agent (agent keys install, use, remove, each run
// on every member through gossip) while the clients' traffic and the
// schedulers' writes go on. It is never drawn, only scheduled. The
// checker holds it to more than liveness: leadership must not move
// between its fault and heal records (Check, invariant 7).
const rotateKey = "rotate-key"

// rotate runs one key rotation through node n's socket. Every step must
// reach every member; a step that does not is run again (each step is
// idempotent) until it does or the liveness bound passes, which fails
// the run.
func (h *harness) rotate(ctx context.Context, n *node) (string, error) {
	want := len(h.nodes)
	var list api.KeyReport
	if err := h.untilAll(ctx, "keys list", want, func(ctx context.Context) (api.KeyReport, error) {
		r, err := n.c.ClusterKeys(ctx)
		list = r
		return r, err
	}); err != nil {
		return "", err
	}
	i := slices.IndexFunc(list.Keys, func(k api.KeyCount) bool { return k.Primary == want })
	if i < 0 {
		return "", fmt.Errorf("chaos: %s: no key is every member's primary: %+v", rotateKey, list.Keys)
	}
	old := list.Keys[i]
	next, err := membership.GenerateKey()
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	for _, s := range []struct{ op, key string }{{api.KeyInstall, next}, {api.KeyUse, next}, {api.KeyRemove, old.Key}} {
		if err := h.untilAll(ctx, "keys "+s.op, want, func(ctx context.Context) (api.KeyReport, error) {
			return n.c.ChangeClusterKeys(ctx, s.op, s.key, false)
		}); err != nil {
			return "", err
		}
	}
	b, err := keyring.ParseKey(next)
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	return fmt.Sprintf("key %s replaced by %s", old.Fingerprint, keyring.Fingerprint(b)), nil
}

// untilAll runs step until every one of want members acknowledges it, or
// fails once the liveness bound has passed.
func (h *harness) untilAll(ctx context.Context, what string, want int, step func(context.Context) (api.KeyReport, error)) error {
	deadline := time.Now().Add(h.opt.Bound)
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := step(sctx)
		cancel()
		if err == nil && r.Members == want && r.Acked == want {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s: %s not acknowledged by all %d agents within %s: [%d/%d], failed %+v, error %v", rotateKey, what, want, h.opt.Bound, r.Acked, r.Members, r.Failed, err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
