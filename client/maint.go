package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/conclave-agent/conclave/api"
)

// Maint enters (on) or leaves maintenance mode, giving reason for status
// and logs (api.PathMaint). The agent answers once the mode is on disk.
func (c *Client) Maint(ctx context.Context, on bool, reason string) (api.MaintResult, error) {
	q := url.Values{api.ParamEnable: {strconv.FormatBool(on)}}
	if reason != "" {
		q.Set(api.ParamReason, reason)
	}
	var res api.MaintResult
	p, err := c.path(api.PathMaint)
	if err != nil {
		return res, err
	}
	err = c.do(ctx, http.MethodPost, p, q, &res)
	return res, err
}
