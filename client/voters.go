package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/conclave-agent/conclave/api"
)

// Voters returns the voter configuration the agent holds (majority): the
// committed set and its index, and a pending change if there is one.
func (c *Client) Voters(ctx context.Context) (api.Voters, error) {
	var v api.Voters
	p, err := c.path(api.PathVoters)
	if err != nil {
		return v, err
	}
	err = c.getJSON(ctx, p, nil, &v)
	return v, err
}

// AddVoter makes member name a voter and returns once the change is
// committed. Any agent takes it; a follower forwards it to the leader.
func (c *Client) AddVoter(ctx context.Context, name string) (api.Voters, error) {
	return c.changeVoters(ctx, api.VoterChange{Add: name})
}

// RemoveVoter makes voter name an observer and returns once the change is
// committed.
func (c *Client) RemoveVoter(ctx context.Context, name string) (api.Voters, error) {
	return c.changeVoters(ctx, api.VoterChange{Remove: name})
}

func (c *Client) changeVoters(ctx context.Context, ch api.VoterChange) (api.Voters, error) {
	var v api.Voters
	p, err := c.path(api.PathVoters)
	if err != nil {
		return v, err
	}
	body, err := json.Marshal(ch)
	if err != nil {
		return v, fmt.Errorf("agent %s: %w", p, err)
	}
	err = c.postJSON(ctx, p, body, &v)
	return v, err
}

// postJSON posts a JSON body to path and decodes the answer into out.
func (c *Client) postJSON(ctx context.Context, path string, body []byte, out any) error {
	c.init()
	u := url.URL{Scheme: "http", Host: api.Host, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("agent %s: %w", path, err)
	}
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("agent %s: %w", path, ctx.Err())
		}
		return fmt.Errorf("agent %s (is the agent running? socket %s): %w", path, c.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("agent %s: reading answer: %w", path, err)
	}
	if len(b) > maxAnswerBytes {
		return fmt.Errorf("agent %s: answer larger than %d bytes", path, maxAnswerBytes)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("agent %s: decoding answer: %w", path, err)
	}
	return nil
}
