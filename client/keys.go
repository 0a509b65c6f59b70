package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/conclave-agent/conclave/api"
)

// Keys returns the agent's installed cluster keys (api.PathKeys). It
// needs write permission: the answer holds the keys.
func (c *Client) Keys(ctx context.Context) (api.Keys, error) {
	var k api.Keys
	err := c.getJSON(ctx, api.PathKeys, nil, &k)
	return k, err
}

// ChangeKeys installs, uses or removes one key on the agent (op is
// api.KeyInstall, api.KeyUse or api.KeyRemove) and returns the keys then
// installed. Each step is idempotent.
func (c *Client) ChangeKeys(ctx context.Context, op, key string) (api.Keys, error) {
	var k api.Keys
	body, err := json.Marshal(api.KeyChange{Op: op, Key: key})
	if err != nil {
		return k, fmt.Errorf("agent %s: %w", api.PathKeys, err)
	}
	err = c.postJSON(ctx, api.PathKeys, body, &k)
	return k, err
}

// ClusterKeys lists every member's installed keys through gossip
// (api.PathClusterKeys): how many members hold each key and use it as
// their primary, and the members that did not answer. It needs write
// permission.
func (c *Client) ClusterKeys(ctx context.Context) (api.KeyReport, error) {
	var r api.KeyReport
	err := c.getJSON(ctx, api.PathClusterKeys, nil, &r)
	return r, err
}

// ChangeClusterKeys runs one rotation step (op is api.KeyInstall,
// api.KeyUse or api.KeyRemove) on every member through gossip and reports
// who acknowledged. Each step is idempotent, so a step some member missed
// is run again. force runs a use or a remove although some member is not
// confirmed ready (api.ClusterKeyChange).
func (c *Client) ChangeClusterKeys(ctx context.Context, op, key string, force bool) (api.KeyReport, error) {
	var r api.KeyReport
	body, err := json.Marshal(api.ClusterKeyChange{Op: op, Key: key, Force: force})
	if err != nil {
		return r, fmt.Errorf("agent %s: %w", api.PathClusterKeys, err)
	}
	err = c.postJSON(ctx, api.PathClusterKeys, body, &r)
	return r, err
}
