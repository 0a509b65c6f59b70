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
