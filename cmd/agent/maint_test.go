package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
)

func TestStatusPrintsHealthAndLeaderMeta(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, api.Status{Node: "n1", Role: api.RoleLeader, Leader: "n1", Epoch: 4,
		LeaderMeta: api.NewMeta(map[string]string{"addr": "10.0.0.5:5432"}),
		Health: &api.HealthReport{Status: api.HealthMaintenance, Priority: 10, NoHealthyCandidate: true,
			Maintenance: &api.MaintInfo{Reason: "kernel upgrade", Since: time.Unix(0, 0).UTC()},
			Checks:      []api.CheckState{{Name: "web", Status: api.CheckFailing, Output: "HTTP 503\ndb down\n"}}}})
	out := b.String()
	for _, want := range []string{"leader meta  addr=10.0.0.5:5432", "health", "maintenance (since 1970-01-01T00:00:00Z: kernel upgrade); still leading: no healthy voter can take over", "priority", "check web", "failing  db down"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printStatus(&b, api.Status{Node: "n1"})
	if strings.Contains(b.String(), "\nhealth ") || strings.Contains(b.String(), "meta") {
		t.Errorf("an agent without health prints some:\n%s", b.String())
	}
}

func TestMaintUsage(t *testing.T) {
	for _, args := range [][]string{{"maint"}, {"maint", "maybe"}, {"maint", "off", "-reason", "x"}, {"maint", "on", "extra"}} {
		if code, _, _ := cli(t, args...); code != 2 {
			t.Errorf("agent %v: exit %d, want 2", args, code)
		}
	}
}
