package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/keyring"
)

// agent keys against a real agent: list, a rotation's three steps (each
// run twice: idempotent), the refusal to remove the primary, and the
// keyring file that a restart reads.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "n1", "agent.sock")
	_, oldKey, _ := cli(t, "keygen")
	_, newKey, _ := cli(t, "keygen")
	oldKey, newKey = strings.TrimSpace(oldKey), strings.TrimSpace(newKey)
	path := writeConfig(t, fmt.Sprintf(`
[node]
name = "n1"
id = 1
data_dir = %q
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
key = %q
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
voters = ["n1"]
[api]
socket = %q
`, filepath.Join(dir, "n1"), testFreePort(t), oldKey, testFreePort(t), sock))
	var stdout, stderr syncBuffer
	stop := background(t, &stdout, &stderr, "run", "-config", path)
	defer stop()
	eventually(t, 20*time.Second, "the agent to answer", func() bool {
		code, _, _ := cli(t, "status", "-socket", sock)
		return code == 0
	})
	keys := func(args ...string) string {
		t.Helper()
		code, out, errOut := cli(t, append([]string{"keys"}, append(args, "-socket", sock)...)...)
		if code != 0 {
			t.Fatalf("agent keys %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	if out := keys("list"); !strings.Contains(out, oldKey+"  ") || !strings.Contains(out, "[1/1]  primary") {
		t.Fatalf("agent keys list:\n%s", out)
	}
	for range 2 {
		keys("install", newKey)
	}
	for range 2 {
		keys("use", newKey)
	}
	code, _, errOut := cli(t, "keys", "remove", newKey, "-socket", sock)
	if code == 0 || !strings.Contains(errOut, "primary") {
		t.Errorf("agent keys remove PRIMARY: exit %d, %q; want a refusal naming the primary", code, errOut)
	}
	for range 2 {
		keys("remove", oldKey)
	}
	out := keys()
	if strings.Contains(out, oldKey) || !strings.Contains(out, newKey+"  "+fingerprint(t, newKey)+"  [1/1]  primary") {
		t.Errorf("agent keys after the rotation:\n%s", out)
	}
	r, err := keyring.Load(filepath.Join(dir, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if keyring.Encode(r.Primary()) != newKey || len(r.Keys()) != 1 {
		t.Errorf("keyring file after the rotation: primary %s, %d keys", keyring.Fingerprint(r.Primary()), len(r.Keys()))
	}
	if !strings.Contains(stderr.String(), "audit: socket write") {
		t.Error("the agent logged no audit line for the key changes")
	}
}

func fingerprint(t *testing.T, key string) string {
	b, err := keyring.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return keyring.Fingerprint(b)
}

// The report's two forms, as an operator reads them: a list with a key
// that is the primary of some members only, and a step that a member
// missed, named with its reason.
func TestPrintKeyReport(t *testing.T) {
	var b strings.Builder
	printKeyReport(&b, api.KeyReport{Op: "list", Members: 3, Acked: 2,
		Failed: []api.KeyFailure{{Member: "n3", Error: "no answer in time"}},
		Keys:   []api.KeyCount{{Key: "NEW=", Fingerprint: "aaaa0001", Installed: 2, Primary: 1}, {Key: "OLD=", Fingerprint: "bbbb0002", Installed: 2, Primary: 1}}})
	printKeyReport(&b, api.KeyReport{Op: "install", Fingerprint: "aaaa0001", Members: 3, Acked: 3, Failed: []api.KeyFailure{}})
	printKeyReport(&b, api.KeyReport{Op: "list", Members: 2, Acked: 2, Keys: []api.KeyCount{{Key: "NEW=", Fingerprint: "aaaa0001", Installed: 2, Primary: 2}}})
	want := `NEW=  aaaa0001  [2/3]  primary on [1/3]
OLD=  bbbb0002  [2/3]  primary on [1/3]
  n3: no answer in time
install aaaa0001: [3/3] members acknowledged
NEW=  aaaa0001  [2/2]  primary
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
