package podnet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Gateway is this host as every pod's own network namespace reaches it: the
// host end of each pod's link carries it (a /32), and the pod's default
// route goes through it. A server of the host listening on all addresses
// (the operator's xDS server) is reached from a pod at Gateway.
const Gateway = "169.254.1.1"

// Pod is a pod's network namespace of its own (AddPod): a veth pair whose
// pod end, eth0, holds the pod's address, a /32 route to it on the host
// (which wins over the range routed to its network's namespace), and a
// default route from the pod to the host through Gateway. With IP
// forwarding on, the pod reaches the host's addresses, the other pods'
// namespaces and the addresses still answered in the networks' namespaces.
type Pod struct {
	// Netns is the network namespace's name, Link the host end of the pair.
	Netns, Link string
	// IP is the pod's address.
	IP string
}

// PodNames returns the names of the network namespace and of the host's
// link of the pod namespace/name whose address is ip: kec-pod-<hash> and
// kecp<hash>, 12 characters, within an interface name's 15. The hash takes
// the pods' network of ip too, so that two clusters' pods of one name, on
// two networks, do not meet.
func PodNames(namespace, name, ip string) (netns, link string) {
	key := namespace + "/" + name
	if addr, err := netip.ParseAddr(ip); err == nil {
		if n, ok := NetworkOf(addr); ok && n != 0 {
			key = fmt.Sprintf("%d:%s", n, key)
		}
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:4])
	return "kec-pod-" + h, "kecp" + h
}

// Root returns nil when this process can make network namespaces, and
// otherwise an error that says what is missing.
func Root() error {
	if os.Geteuid() != 0 {
		return errors.New("podnet: a pod's network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("podnet: a pod's network namespace needs iproute2: %w", err)
	}
	return nil
}

// AddPod makes the network namespace of the pod namespace/name, whose
// address is ip, or keeps it when it is already so. Where the namespace of
// ip's pods' network exists, ip stops being one of its local addresses
// there, so that what it answers reaches the pod.
func AddPod(namespace, name, ip string) (Pod, error) {
	if err := Root(); err != nil {
		return Pod{}, err
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() {
		return Pod{}, fmt.Errorf("podnet: pod %s/%s: %q is no IPv4 address", namespace, name, ip)
	}
	netns, link := PodNames(namespace, name, ip)
	p := Pod{Netns: netns, Link: link, IP: ip}
	if p.complete() {
		return p, nil
	}
	if err := p.Remove(); err != nil {
		return Pod{}, err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return Pod{}, fmt.Errorf("podnet: enabling IP forwarding: %w", err)
	}
	steps := [][]string{
		{"netns", "add", netns},
		{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns},
		{"addr", "add", Gateway + "/32", "dev", link},
		{"link", "set", link, "up"},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "addr", "add", ip + "/32", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		{"-n", netns, "route", "add", Gateway, "dev", "eth0", "scope", "link"},
		{"-n", netns, "route", "add", "default", "via", Gateway, "dev", "eth0"},
		{"route", "replace", ip + "/32", "dev", link, "scope", "link"},
	}
	if n, ok := NetworkOf(addr); ok && Available(n.Namespace()) {
		// The network's table local makes its whole range local; the /32
		// sends this address, and replies to it, back to the host.
		steps = append(steps, []string{"-n", n.Namespace(), "route", "replace", ip + "/32", "via", n.hostAddr(), "dev", n.link(), "table", "local"})
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return Pod{}, errors.Join(err, p.Remove())
		}
	}
	return p, nil
}

// complete reports whether p's namespace, link, address and route are there.
func (p Pod) complete() bool {
	if _, err := os.Stat(filepath.Join("/run/netns", p.Netns)); err != nil {
		return false
	}
	if _, err := net.InterfaceByName(p.Link); err != nil {
		return false
	}
	out, err := exec.Command("ip", "-n", p.Netns, "-4", "-o", "addr", "show", "dev", "eth0").Output()
	if err != nil || !bytes.Contains(out, []byte(" "+p.IP+"/32 ")) {
		return false
	}
	route, err := exec.Command("ip", "-4", "-o", "route", "show", p.IP+"/32").Output()
	return err == nil && bytes.Contains(route, []byte("dev "+p.Link+" "))
}

// Remove takes p's namespace, link and routes away; what is already gone
// is no error. A process still running in the namespace keeps it alive
// until it exits: stop it first.
func (p Pod) Remove() error {
	if err := Root(); err != nil {
		return err
	}
	var errs []error
	// A pod made since with the same address (the cluster gave it again)
	// keeps its route in its network's namespace.
	reused := false
	if p.IP != "" {
		route, err := exec.Command("ip", "-4", "-o", "route", "show", p.IP+"/32").Output()
		if err != nil {
			return fmt.Errorf("ip route show %s/32: %w", p.IP, err)
		}
		reused = len(bytes.TrimSpace(route)) > 0 && !bytes.Contains(route, []byte("dev "+p.Link+" "))
	}
	if addr, err := netip.ParseAddr(p.IP); err == nil && !reused {
		if n, ok := NetworkOf(addr); ok && Available(n.Namespace()) {
			ns := n.Namespace()
			out, err := exec.Command("ip", "-n", ns, "-o", "route", "show", "table", "local", p.IP+"/32").Output()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("ip -n %s route show table local %s/32: %w", ns, p.IP, err))
			case len(bytes.TrimSpace(out)) > 0 && !bytes.HasPrefix(out, []byte("local ")):
				errs = append(errs, ipCmd("-n", ns, "route", "del", p.IP+"/32", "table", "local"))
			}
		}
	}
	if _, err := net.InterfaceByName(p.Link); err == nil {
		errs = append(errs, ipCmd("link", "del", p.Link))
	}
	if _, err := os.Stat(filepath.Join("/run/netns", p.Netns)); err == nil {
		errs = append(errs, ipCmd("netns", "del", p.Netns))
	}
	return errors.Join(errs...)
}

// Command returns cmd to run name with args in the network namespace
// netns (ip netns exec: the process is name itself once started).
func Command(netns, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", netns, name}, args...)...)
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
