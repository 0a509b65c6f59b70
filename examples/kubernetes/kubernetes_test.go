package kubernetes

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
)

const manifest = "../../contrib/kubernetes/conclave.yaml"

// objects are the manifest's documents, decoded strictly by kind.
type objects struct {
	secret    corev1.Secret
	configMap corev1.ConfigMap
	service   corev1.Service
	daemonSet appsv1.DaemonSet
}

func decode(t *testing.T) objects {
	t.Helper()
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	seen := map[string]int{}
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v", manifest, err)
		}
		if tm.Kind == "" {
			continue // the leading comment
		}
		var into any
		switch tm.Kind {
		case "Secret":
			into = &o.secret
		case "ConfigMap":
			into = &o.configMap
		case "Service":
			into = &o.service
		case "DaemonSet":
			into = &o.daemonSet
		default:
			t.Fatalf("%s: unexpected kind %s", manifest, tm.Kind)
		}
		// Strict: an unknown or misspelt field is an error, as kubectl's
		// server-side validation would make it.
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %s: %v", manifest, tm.Kind, err)
		}
		seen[tm.Kind]++
	}
	for _, k := range []string{"Secret", "ConfigMap", "Service", "DaemonSet"} {
		if seen[k] != 1 {
			t.Fatalf("%s: %d %s documents, want 1", manifest, seen[k], k)
		}
	}
	return o
}

// expand replaces $(VAR) as the kubelet does in command and args.
func expand(s string, env map[string]string) string {
	return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// agentArgs runs the container's command with a real sh, with the agent
// replaced by printf, and returns the arguments it would have given
// "agent run".
func agentArgs(t *testing.T, c corev1.Container, env map[string]string) []string {
	t.Helper()
	if len(c.Command) < 3 || c.Command[0] != "/bin/sh" {
		t.Fatalf("container %s: command %q, want /bin/sh -ec SCRIPT", c.Name, c.Command)
	}
	const run = "exec /usr/bin/agent run"
	if !strings.Contains(c.Command[2], run) {
		t.Fatalf("container %s: its script does not %q", c.Name, run)
	}
	script := strings.Replace(c.Command[2], run, `printf '%s\n'`, 1)
	argv := append([]string{c.Command[1], script}, c.Command[3:]...)
	for _, a := range c.Args {
		argv = append(argv, expand(a, env))
	}
	cmd := exec.Command("/bin/sh", argv...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the container's command: %v: %s", err, stderr.String())
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// load parses args with the agent's own flags (those of agent run) and
// loads the config file they name, which is the ConfigMap's key.
func load(t *testing.T, o objects, args []string, mounts map[string]string) (config.Config, string, error) {
	t.Helper()
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "")
	fl := config.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("agent run %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Fatalf("agent run %q: stray words %q", args, fs.Args())
	}
	dir, key := filepath.Split(*cfgPath)
	if mounts["config"] != filepath.Clean(dir) {
		t.Fatalf("-config=%s is not in the ConfigMap's mount %s", *cfgPath, mounts["config"])
	}
	toml, ok := o.configMap.Data[key]
	if !ok {
		t.Fatalf("-config=%s: the ConfigMap has no key %q", *cfgPath, key)
	}
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := fl.Load(path)
	return c, *cfgPath, err
}

func port(t *testing.T, hostPort string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// multiaddrPort is the TCP port of /ip4/…/tcp/PORT.
func multiaddrPort(t *testing.T, ma string) int32 {
	t.Helper()
	parts := strings.Split(ma, "/")
	i := slices.Index(parts, "tcp")
	if i < 0 || i+1 >= len(parts) {
		t.Fatalf("%q has no /tcp/PORT", ma)
	}
	n, err := strconv.Atoi(parts[i+1])
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func TestDaemonSetMatchesTheAgentsConfig(t *testing.T) {
	o := decode(t)
	pod := o.daemonSet.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the agent alone", len(pod.Containers))
	}
	c := pod.Containers[0]

	// Volumes: where each is mounted, and the host path behind it.
	mounts, hostPaths := map[string]string{}, map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
		if v.ConfigMap != nil && v.ConfigMap.Name != o.configMap.Name {
			t.Errorf("volume %s mounts ConfigMap %q, the manifest's is %q", v.Name, v.ConfigMap.Name, o.configMap.Name)
		}
	}

	// The environment the kubelet gives: the node's name and address,
	// and the key from the Secret (a fresh one, as agent keygen makes).
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = "node-a"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP":
			env[e.Name] = "10.1.2.3"
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Name != o.secret.Name {
				t.Errorf("env %s reads Secret %q, the manifest's is %q", e.Name, ref.Name, o.secret.Name)
			}
			if _, ok := o.secret.StringData[ref.Key]; !ok {
				t.Errorf("env %s reads key %q, which the Secret lacks", e.Name, ref.Key)
			}
			env[e.Name] = base64.StdEncoding.EncodeToString(key)
		default:
			t.Errorf("env %s: unexpected source", e.Name)
		}
	}

	args := agentArgs(t, c, env)
	cfg, cfgPath, err := load(t, o, args, mounts)
	if err != nil {
		t.Fatalf("agent run %q with the ConfigMap: %v", args, err)
	}
	shown := regexp.MustCompile(`(-gossip\.key=)\S+`).ReplaceAllString(strings.Join(args, " "), "${1}…")
	t.Logf("agent run %s: node %s (id %d), data %s, socket %s, gossip %s, transport %s, metrics %s",
		shown, cfg.Node.Name, cfg.Node.ID, cfg.Node.DataDir, cfg.API.Socket, cfg.Gossip.Bind, cfg.Transport.Listen, cfg.Metrics.Listen)
	if cfgPath == "" || cfg.Node.Name != "node-a" {
		t.Errorf("node.name = %q, want the node's name", cfg.Node.Name)
	}
	if want := uint64(1*65536 + 2*256 + 3); cfg.Node.ID != want {
		t.Errorf("node.id = %d for 10.1.2.3, want %d (its low 20 bits)", cfg.Node.ID, want)
	}
	if cfg.Gossip.Key == "" {
		t.Error("gossip.key is empty: the cluster would run unencrypted")
	}

	// Paths: the data directory and the socket's directory are host
	// paths (kept across pod restarts; shared with local pods), mounted
	// where the config points.
	if mounts["data"] != cfg.Node.DataDir || hostPaths["data"] != cfg.Node.DataDir {
		t.Errorf("node.data_dir %s: volume data is mounted at %q from host %q", cfg.Node.DataDir, mounts["data"], hostPaths["data"])
	}
	sockDir := filepath.Dir(cfg.API.Socket)
	if mounts["socket"] != sockDir || hostPaths["socket"] != sockDir {
		t.Errorf("api.socket %s: volume socket is mounted at %q from host %q", cfg.API.Socket, mounts["socket"], hostPaths["socket"])
	}
	if !strings.Contains(mustRead(t, manifest), "value: "+cfg.API.Socket) {
		t.Errorf("the manifest's note for local pods does not give CONCLAVE_SOCKET=%s", cfg.API.Socket)
	}

	// Ports: the container's and the advertised ones are the config's.
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	gossip := port(t, cfg.Gossip.Bind)
	for _, want := range []struct {
		name  string
		port  int32
		proto corev1.Protocol
	}{
		{"gossip", gossip, corev1.ProtocolTCP},
		{"gossip-udp", gossip, corev1.ProtocolUDP},
		{"transport", multiaddrPort(t, cfg.Transport.Listen), corev1.ProtocolTCP},
		{"metrics", port(t, cfg.Metrics.Listen), corev1.ProtocolTCP},
	} {
		p, ok := ports[want.name]
		if !ok || p.ContainerPort != want.port || p.Protocol != want.proto {
			t.Errorf("container port %s = %+v, want %d/%s", want.name, p, want.port, want.proto)
		}
	}
	if port(t, cfg.Gossip.Advertise) != gossip {
		t.Errorf("gossip.advertise %s is not on gossip.bind's port %d", cfg.Gossip.Advertise, gossip)
	}
	if multiaddrPort(t, cfg.Transport.Advertise) != multiaddrPort(t, cfg.Transport.Listen) {
		t.Errorf("transport.advertise %s is not on transport.listen's port", cfg.Transport.Advertise)
	}
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %s: agents must be reached at their node's address and resolve the Service", pod.HostNetwork, pod.DNSPolicy)
	}
	if got := o.daemonSet.Spec.Template.Annotations["prometheus.io/port"]; got != fmt.Sprint(port(t, cfg.Metrics.Listen)) {
		t.Errorf("prometheus.io/port %q, metrics.listen %s", got, cfg.Metrics.Listen)
	}

	// The probes ask the read-only health endpoint on the metrics port.
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != api.PathHealth || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %+v, want GET %s on port metrics", name, p, api.PathHealth)
		}
	}

	// Join: the headless Service resolves to the agents, on the gossip port.
	svc := o.service
	host := svc.Name + "." + svc.Namespace + ".svc.cluster.local"
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want a headless one that lists agents before they are ready", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if !slices.Contains(cfg.Gossip.Join, net.JoinHostPort(host, fmt.Sprint(gossip))) {
		t.Errorf("gossip.join %q does not name the Service %s on port %d", cfg.Gossip.Join, host, gossip)
	}
	for k, v := range svc.Spec.Selector {
		if o.daemonSet.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the DaemonSet's pods lack", k, v)
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.Port != gossip {
			t.Errorf("Service port %s = %d, want gossip's %d", p.Name, p.Port, gossip)
		}
	}
	if len(cfg.Election.Voters) == 0 {
		t.Error("election.voters is empty")
	}
}

// The Secret as shipped holds a placeholder, which the agent refuses: an
// unedited example cannot start a cluster without a key.
func TestPlaceholderKeyIsRefused(t *testing.T) {
	o := decode(t)
	c := o.daemonSet.Spec.Template.Spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	env := map[string]string{"NODE_NAME": "node-a", "HOST_IP": "10.1.2.3"}
	for _, e := range c.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			env[e.Name] = o.secret.StringData[ref.Key]
		}
	}
	_, _, err := load(t, o, agentArgs(t, c, env), mounts)
	if err == nil || !strings.Contains(err.Error(), "gossip.key") {
		t.Errorf("the shipped Secret's key: %v; want the agent to refuse gossip.key", err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
