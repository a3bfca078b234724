// Command freeport prints N distinct local TCP ports, one a line, that were
// free when it ran: for the scripts in hack/ that start an operator on the
// host.
//
//	go run ./hack/freeport [N]
//
// It binds each candidate on 127.0.0.1 rather than connecting to it (a port
// that refuses connections may still be bound by a socket that does not
// listen yet), and holds every port it picked until all N are picked, so that
// the N are distinct. The ports are below the kernel's ephemeral range, from
// which outgoing connections, the local cluster's among them, take theirs.
// Another process may still take a port between this command's exit and its
// use; the scripts then fail at start, they do not share a port.
package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

func main() {
	n := 1
	if len(os.Args) > 1 {
		var err error
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n < 1 || len(os.Args) > 2 {
			fmt.Fprintln(os.Stderr, "usage: freeport [N]   (N >= 1)")
			os.Exit(2)
		}
	}
	ports, err := pick(n, 20000, ephemeralLow(), 100*n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range ports {
		fmt.Println(p)
	}
}

// pick binds n distinct ports in [low, high), trying at most tries random
// candidates, and releases them once all are picked.
func pick(n, low, high, tries int) ([]int, error) {
	if high-low < n {
		return nil, fmt.Errorf("no room for %d ports in [%d, %d)", n, low, high)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	for range tries {
		if len(ports) == n {
			break
		}
		p := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken, or held by this command already
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("found %d free ports of %d in [%d, %d)", len(ports), n, low, high)
	}
	return ports, nil
}

// ephemeralLow is the start of the kernel's ephemeral port range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 20000 {
		return 32768
	}
	return low
}
