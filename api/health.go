package api

import (
	"encoding/json"
	"time"
)

// PathMaint: POST with ParamEnable (and optionally ParamReason) → 200
// MaintResult once maintenance is recorded on disk and the election told;
// 403 when the caller is neither the agent's own user nor root. See
// docs/health.md.
const PathMaint = "/v1/maint"

// Query parameters of PathMaint.
const (
	// ParamEnable is "true" (enter maintenance) or "false" (leave it).
	ParamEnable = "enable"
	// ParamReason says why, for status and logs (at most MaxMaintReason
	// bytes, no control characters).
	ParamReason = "reason"
)

// MaxMaintReason bounds ParamReason.
const MaxMaintReason = 256

// Health states, the values of HealthReport.Status.
const (
	HealthPassing     = "passing"
	HealthFailing     = "failing"
	HealthMaintenance = "maintenance"
)

// Check states, the values of CheckState.Status.
const (
	CheckPending = "pending"
	CheckPassing = "passing"
	CheckFailing = "failing"
)

// HealthReport is this agent's fitness to lead ([[check]], maintenance).
type HealthReport struct {
	// Status is HealthMaintenance while in maintenance, else HealthPassing
	// when every check passes, else HealthFailing. Only a passing agent
	// puts itself forward for leadership.
	Status string `json:"status"`
	// Maintenance is set while in maintenance.
	Maintenance *MaintInfo `json:"maintenance,omitempty"`
	// Checks are the configured checks, in configuration order.
	Checks []CheckState `json:"checks"`
	// Priority is node.priority.
	Priority int `json:"priority"`
	// NoHealthyCandidate is true while this node leads without passing
	// because no healthy, reachable voter can take over (docs/health.md).
	NoHealthyCandidate bool `json:"no_healthy_candidate,omitempty"`
}

// MarshalJSON writes Checks as [] when there are none, never null: a
// client that iterates over the checks (jq '.health.checks[]', Python's
// for loop) must not need a special case for an agent without [[check]].
func (h HealthReport) MarshalJSON() ([]byte, error) {
	type plain HealthReport // without this method, so no recursion
	p := plain(h)
	if p.Checks == nil {
		p.Checks = []CheckState{}
	}
	return json.Marshal(p)
}

// CheckState is one check's last result.
type CheckState struct {
	Name string `json:"name"`
	// Status is CheckPending (not run yet; counts as failing),
	// CheckPassing or CheckFailing.
	Status string `json:"status"`
	// Output is the tail of the last run's output (at most 1 KiB).
	Output string `json:"output"`
	// LastRun is when the last run ended.
	LastRun time.Time `json:"last_run,omitzero"`
}

// MaintInfo describes maintenance mode.
type MaintInfo struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// MaintResult is the body of a 200 answer from PathMaint.
type MaintResult struct {
	// Maintenance is the mode now in force.
	Maintenance bool       `json:"maintenance"`
	Info        *MaintInfo `json:"info,omitempty"`
}

// Meta is a node's published map (node.meta), as leader_meta. It is kept
// in a canonical encoding so that Status stays comparable (the agent
// publishes a status only when it differs from the last): read it with Map
// or Get. The zero value is no meta; on the wire it is a JSON object.
type Meta struct {
	canon string // canonical JSON object, or "" for none
}

// NewMeta returns m as a Meta (none when m is empty).
func NewMeta(m map[string]string) Meta {
	if len(m) == 0 {
		return Meta{}
	}
	b, err := json.Marshal(m) // sorts the keys: canonical
	if err != nil {
		return Meta{}
	}
	return Meta{canon: string(b)}
}

// Map returns a copy of the map (nil for none).
func (m Meta) Map() map[string]string {
	if m.canon == "" {
		return nil
	}
	var out map[string]string
	_ = json.Unmarshal([]byte(m.canon), &out)
	return out
}

// Get returns the value of key k.
func (m Meta) Get(k string) string { return m.Map()[k] }

// IsZero reports whether m is empty (for omitzero).
func (m Meta) IsZero() bool { return m.canon == "" }

// MarshalJSON writes the object.
func (m Meta) MarshalJSON() ([]byte, error) {
	if m.canon == "" {
		return []byte("null"), nil
	}
	return []byte(m.canon), nil
}

// UnmarshalJSON reads an object of strings.
func (m *Meta) UnmarshalJSON(b []byte) error {
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = NewMeta(v)
	return nil
}
