package realenvoy

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// Proxy is what one proxy's container runs with, as the kubelet would give
// it: Envoy's arguments, with $(VAR) references expanded, and the files
// mounted into the container, by their path in it.
type Proxy struct {
	// Pod is the pod's name: the proxy's node id.
	Pod  string
	Args []string
	// Files are the mounted files' contents by their absolute path.
	Files map[string][]byte
	// Dirs are the mounted empty directories (emptyDir volumes).
	Dirs []string
}

// FromPod returns what the Envoy container of pod runs with, from the
// ConfigMaps and Secrets its volumes name: the container named envoy, among
// the pod's containers or its init containers (a native sidecar).
func FromPod(pod *corev1.Pod, configMaps map[string]*corev1.ConfigMap, secrets map[string]*corev1.Secret) (Proxy, error) {
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == proxy.ContainerName {
				c = &list[i]
			}
		}
	}
	if c == nil {
		return Proxy{}, fmt.Errorf("pod %s/%s has no container %s", pod.Namespace, pod.Name, proxy.ContainerName)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod.Name
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = pod.Namespace
		}
	}
	p := Proxy{Pod: pod.Name, Files: map[string][]byte{}}
	for _, a := range c.Args {
		p.Args = append(p.Args, expand(a, env))
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return Proxy{}, fmt.Errorf("pod %s: mount %s names no volume", pod.Name, m.Name)
		}
		switch {
		case v.ConfigMap != nil:
			cm, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				return Proxy{}, fmt.Errorf("pod %s: no ConfigMap %s", pod.Name, v.ConfigMap.Name)
			}
			data := map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			mount(p.Files, m.MountPath, data, v.ConfigMap.Items)
		case v.Secret != nil:
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				return Proxy{}, fmt.Errorf("pod %s: no Secret %s", pod.Name, v.Secret.SecretName)
			}
			mount(p.Files, m.MountPath, s.Data, v.Secret.Items)
		case v.EmptyDir != nil:
			p.Dirs = append(p.Dirs, m.MountPath)
		case v.Projected != nil:
			// The API token the ServiceAccount admission mounts in every
			// container: Envoy reads none of it, and a host proxy gets none.
			p.Dirs = append(p.Dirs, m.MountPath)
		default:
			return Proxy{}, fmt.Errorf("pod %s: volume %s is of a kind a host proxy cannot mount", pod.Name, v.Name)
		}
	}
	return p, nil
}

func mount(files map[string][]byte, dir string, data map[string][]byte, items []corev1.KeyToPath) {
	if len(items) == 0 {
		for k, v := range data {
			files[filepath.Join(dir, k)] = v
		}
		return
	}
	for _, it := range items {
		if v, ok := data[it.Key]; ok {
			files[filepath.Join(dir, it.Path)] = v
		}
	}
}

// expand replaces $(NAME) with env's NAME, as the kubelet does in args.
func expand(s string, env map[string]string) string {
	for k, v := range env {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

// Host is where a proxy runs on this host instead of in its pod.
type Host struct {
	// Root is the directory that stands for the container's root: every
	// mounted path /p is Root/p.
	Root string
	// XDS is the host:port at which the operator's xDS server is reached.
	XDS string
	// AdminPort and ReadyPort replace the pod's admin and ready ports, which
	// the proxies of one host cannot share; 0 keeps the pod's (a proxy in
	// its pod's own network namespace).
	AdminPort, ReadyPort uint32
	// AdminAddress, when set, replaces the address the admin interface
	// binds (the pod's loopback): 0.0.0.0 makes it reachable at the pod's
	// address from the host.
	AdminAddress string
	// Delta has Envoy subscribe with the incremental protocol
	// (DELTA_GRPC) where the bootstrap says state of the world (GRPC): the
	// operator serves both, and a test proves each.
	Delta bool
}

// Adapt returns p as it runs on h, changed only where a host differs from a
// pod: every mounted path, in Envoy's arguments and in the YAML files Envoy
// reads, is under h.Root; the bootstrap's admin port (and its static
// cluster to it) is h.AdminPort, its ready listener's port h.ReadyPort, and
// the endpoint of the xDS cluster that ADS names is h.XDS; with
// h.AdminAddress, the admin interface binds that address. The xDS cluster's
// TLS settings (SNI, the server's name it verifies) stay: the operator's
// certificate names its in-cluster Service. Nothing else changes
// (TestAdaptChangesNothingElse).
func Adapt(p Proxy, h Host) (Proxy, error) {
	host, portStr, err := net.SplitHostPort(h.XDS)
	if err != nil {
		return Proxy{}, fmt.Errorf("xDS address %q: %w", h.XDS, err)
	}
	xdsPort, err := strconv.ParseUint(portStr, 10, 32)
	if err != nil {
		return Proxy{}, fmt.Errorf("xDS address %q: %w", h.XDS, err)
	}
	var mounts []string
	for path := range p.Files {
		mounts = append(mounts, filepath.Dir(path))
	}
	mounts = append(mounts, p.Dirs...)
	slices.Sort(mounts)
	mounts = slices.Compact(mounts)
	under := func(s string) bool {
		for _, m := range mounts {
			if s == m || strings.HasPrefix(s, m+"/") {
				return true
			}
		}
		return false
	}
	out := Proxy{Pod: p.Pod, Files: map[string][]byte{}}
	for _, a := range p.Args {
		if under(a) {
			a = filepath.Join(h.Root, a)
		}
		out.Args = append(out.Args, a)
	}
	for _, d := range p.Dirs {
		out.Dirs = append(out.Dirs, filepath.Join(h.Root, d))
	}
	for path, data := range p.Files {
		if strings.HasSuffix(path, ".yaml") {
			tree, err := decode(data)
			if err != nil {
				return Proxy{}, fmt.Errorf("%s: %w", path, err)
			}
			rootPaths(tree, under, h.Root)
			if filepath.Base(path) == proxy.BootstrapKey {
				if err := hostPorts(tree, host, uint32(xdsPort), h); err != nil {
					return Proxy{}, fmt.Errorf("%s: %w", path, err)
				}
				if ads, _ := dig(tree, "dynamic_resources", "ads_config").(map[string]any); h.Delta && ads != nil {
					ads["api_type"] = "DELTA_GRPC"
				}
			}
			if data, err = encode(tree); err != nil {
				return Proxy{}, fmt.Errorf("%s: %w", path, err)
			}
		}
		out.Files[filepath.Join(h.Root, path)] = data
	}
	return out, nil
}

func decode(data []byte) (any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var tree any
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.UseNumber()
	return tree, dec.Decode(&tree)
}

func encode(tree any) ([]byte, error) {
	j, err := json.Marshal(tree)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// rootPaths puts every string of tree that is a mounted path under root.
func rootPaths(tree any, under func(string) bool, root string) {
	switch t := tree.(type) {
	case map[string]any:
		for k, v := range t {
			if s, ok := v.(string); ok && under(s) {
				t[k] = filepath.Join(root, s)
			} else {
				rootPaths(v, under, root)
			}
		}
	case []any:
		for i, v := range t {
			if s, ok := v.(string); ok && under(s) {
				t[i] = filepath.Join(root, s)
			} else {
				rootPaths(v, under, root)
			}
		}
	}
}

// hostPorts moves the bootstrap's admin interface, its ready listener and
// its xDS cluster's endpoint to the host's.
func hostPorts(tree any, xdsHost string, xdsPort uint32, h Host) error {
	b, _ := tree.(map[string]any)
	xdsCluster, _ := dig(b, "dynamic_resources", "ads_config", "grpc_services", 0, "envoy_grpc", "cluster_name").(string)
	if xdsCluster == "" {
		return fmt.Errorf("the bootstrap's ADS names no cluster")
	}
	admin, _ := dig(b, "admin", "address", "socket_address").(map[string]any)
	if admin == nil {
		return fmt.Errorf("the bootstrap has no admin address")
	}
	oldAdmin := admin["port_value"]
	if h.AdminPort != 0 {
		admin["port_value"] = h.AdminPort
	}
	if h.AdminAddress != "" {
		admin["address"] = h.AdminAddress
	}
	moved := map[string]bool{}
	clusters, _ := dig(b, "static_resources", "clusters").([]any)
	for _, c := range clusters {
		c, _ := c.(map[string]any)
		addr, _ := dig(c, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address").(map[string]any)
		switch {
		case addr == nil:
		case c["name"] == xdsCluster:
			addr["address"], addr["port_value"] = xdsHost, xdsPort
			moved["xds"] = true
		case h.AdminPort != 0 && fmt.Sprint(addr["port_value"]) == fmt.Sprint(oldAdmin) && isLoopback(addr["address"]):
			addr["port_value"] = h.AdminPort
		}
	}
	listeners, _ := dig(b, "static_resources", "listeners").([]any)
	for _, l := range listeners {
		addr, _ := dig(l, "address", "socket_address").(map[string]any)
		if addr != nil && dig(l, "name") == proxy.ReadyListenerName {
			if h.ReadyPort != 0 {
				addr["port_value"] = h.ReadyPort
			}
			moved["ready"] = true
		}
	}
	if !moved["xds"] {
		return fmt.Errorf("no static cluster %q with an endpoint", xdsCluster)
	}
	return nil
}

func isLoopback(a any) bool {
	ip := net.ParseIP(fmt.Sprint(a))
	return ip != nil && ip.IsLoopback()
}

// dig follows keys (strings) and indexes (ints) into tree.
func dig(tree any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := tree.(map[string]any)
			if !ok {
				return nil
			}
			tree = m[k]
		case int:
			l, ok := tree.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			tree = l[k]
		}
	}
	return tree
}

// FleetPod returns what a pod of fleet fleetID, named node, runs Envoy
// with when its bootstrap is b (a test's variant of proxy.Bootstrap(xds,
// ...)): the bootstrap and its SDS files, the fleet's client certificate
// and key and the trusted CA bundle, as its volumes mount them, and its
// container's arguments.
func FleetPod(b proto.Message, xds proxy.XDSServer, fleetID, node string, cert, key, bundle []byte) (Proxy, error) {
	files := map[string][]byte{}
	var err error
	if files[proxy.BootstrapPath], err = proxy.YAML(b); err != nil {
		return Proxy{}, err
	}
	for name, resp := range proxy.SDSFiles(xds) {
		if files[path.Join(proxy.BootstrapDir, name)], err = proxy.YAML(resp); err != nil {
			return Proxy{}, err
		}
	}
	files[path.Join(proxy.ClientCertDir, proxy.ClientCertFile)] = cert
	files[path.Join(proxy.ClientCertDir, proxy.ClientKeyFile)] = key
	files[path.Join(proxy.ClientCertDir, proxy.TrustedCAFile)] = bundle
	var args []string
	for _, a := range proxy.Container(proxy.ContainerOptions{FleetID: fleetID, LogLevel: "warn", XDS: xds}).Args {
		args = append(args, strings.ReplaceAll(a, "$(POD_NAME)", node))
	}
	return Proxy{Pod: node, Args: args, Files: files}, nil
}
