package suggest

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"node.name", "node.id", "election.election_timeout", "socket", "json"}
	for in, want := range map[string]string{
		"node.nmae":                "node.name",
		"election.electon_timeout": "election.election_timeout",
		"sockt":                    "socket",
		"jsn":                      "json",
		"verbose":                  "",
		"x":                        "",
	} {
		if got := Closest(in, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}
