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
	err := c.do(ctx, http.MethodPost, api.PathMaint, q, &res)
	return res, err
}
